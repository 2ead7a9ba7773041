/**
 * Lazy fan-out over real gRPC: eight agents as real processes, each with its own tag. A change
 * only some of them can see sends exactly those a message (counted in the controller: its log of
 * what it sent, and meshp_deltas_sent_total on /metrics); the others get nothing, write nothing,
 * and are not behind (gap 0 at the version they applied).
 */
import t from 'tap';
import { metricsText } from '../helpers/prom.js';
import { join } from 'node:path';
import {
  adminCalls,
  tokenFor,
  startAgent,
  startController,
  waitUntil,
  workdir,
  type AgentProc,
  type ControllerProc,
  type LogLine,
  nodes as listNodes,
} from '../helpers/grpc-procs.js';

const N = 8;

async function sentTotal(ctl: ControllerProc): Promise<number> {
  const text = await metricsText(ctl.metrics);
  const m = /^meshp_deltas_sent_total (\d+)$/m.exec(text);
  const s = /^meshp_snapshots_sent_total (\d+)$/m.exec(text);
  return Number(m?.[1] ?? NaN) + Number(s?.[1] ?? NaN);
}

const sent = (l: LogLine) => l.msg === 'delta sent' || l.msg === 'snapshot sent';

t.test(`a change visible to some of ${N} agents sends a message to those only`, async (t) => {
  const dir = workdir(t, 'lazy');
  const state = join(dir, 'ctl');
  // At debug: each agent's 'delta sent' line, which says whom (at info, one 'fan-out sent' line a fan-out).
  const ctl = await startController(t, state, [], '127.0.0.1:0', 'debug');
  // The controller's fan-out is under test here, not the CLI: admin calls from this process, each asserted to succeed.
  const admin = adminCalls(() => ctl);
  const policy = (rules: [string, string][]) => t.resolves(admin.policy(rules.map(([from, to]) => ({ from, to }))), `policy set ${JSON.stringify(rules)}`);
  await policy([
    ['t0', 't1'],
    ['t6', 't7'],
  ]);

  const names = Array.from({ length: N }, (_, i) => `n${i}`);
  const tokens = await Promise.all(names.map((_, i) => tokenFor(ctl, [`t${i}`])));
  const agents = names.map((n, i) => startAgent(t, dir, n, ctl.address, tokens[i]));
  const settled = async (expect: string[]) => {
    const nodes = await waitUntil(
      `${expect.length} nodes at gap 0`,
      async () => {
        const nodes = await listNodes(ctl);
        return nodes.length === expect.length && nodes.every((n) => n.gap === 0 && n.appliedVersion > 0) && nodes;
      },
      60_000,
    );
    // The controller's log is read through a pipe: wait until it has the send of every version applied.
    for (const n of nodes) await ctl.proc.waitFor((l) => sent(l) && l.node === n.name && l.toVersion === n.appliedVersion, 15_000);
    return nodes;
  };
  await settled(names);

  /** Runs the change, waits until the expected nodes are at gap 0, answers who was sent what. */
  const measure = async (what: string, change: () => unknown, expect: string[], nodes: string[]) => {
    const mark = ctl.proc.lines.length;
    const before = await sentTotal(ctl);
    await change();
    await settled(nodes);
    for (const n of expect) await ctl.proc.waitFor((l) => sent(l) && l.node === n, 15_000, mark);
    const to = ctl.proc.lines
      .slice(mark)
      .filter(sent)
      .map((l) => String(l.node))
      .sort();
    const count = (await sentTotal(ctl)) - before;
    // One line for the fan-out, with how many agents it reached: as many as were each sent a delta
    // (a joining node's snapshot goes on its hello, not in a fan-out).
    const deltas = ctl.proc.lines.slice(mark).filter((l) => l.msg === 'delta sent').length;
    if (deltas > 0) await ctl.proc.waitFor((l) => l.msg === 'fan-out sent', 15_000, mark);
    const fanned = ctl.proc.lines
      .slice(mark)
      .filter((l) => l.msg === 'fan-out sent')
      .reduce((n, l) => n + Number(l.agents), 0);
    t.equal(fanned, deltas, `${what}: the fan-out line says ${deltas} agent(s), as many as were sent a delta`);
    t.same(to, expect, `${what}: sent to ${expect.join(', ') || 'no one'} only`) ||
      t.comment(JSON.stringify(ctl.proc.lines.slice(mark).filter((l) => l.node && !expect.includes(String(l.node)))));
    t.equal(count, expect.length, `${what}: ${expect.length} message(s) counted on /metrics, not ${nodes.length}`);
    return to;
  };

  // A policy change visible to n2 and n3 only (n2 may reach n3: n2 gets a peer, n3 a peer and its filter).
  await measure(
    'policy t2→t3',
    () =>
      policy([
        ['t0', 't1'],
        ['t6', 't7'],
        ['t2', 't3'],
      ]),
    ['n2', 'n3'],
    names,
  );

  // A module assigned to one node: its declaration, nobody else's view.
  await t.resolves(admin.catalogue([{ name: 'web', files: [{ path: '/etc/web.conf', content: 'x\n' }] }]), 'catalogue add web');
  await measure('module assign on n4', () => t.resolves(admin.assign('n4', 'web'), 'module assign n4 web'), ['n4'], names);

  // A removal seen by one peer (t6 → t7): n6 alone is told; n7's stream is ended, nothing is sent to it.
  await measure('node remove n7', () => t.resolves(admin.remove('n7'), 'node remove n7'), ['n6'], names.slice(0, N - 1));

  // A join seen by one member (t0 → t1: a second t1 node is seen by n0): n0 and the new node's snapshot.
  const token = await tokenFor(ctl, ['t1']);
  let late: AgentProc | undefined;
  await measure('join of n8', () => void (late = startAgent(t, dir, 'n8', ctl.address, token)), ['n0', 'n8'], [...names.slice(0, N - 1), 'n8']);
  await late!.proc.waitFor((l) => l.msg === 'applied' && l.snapshot === true);

  const nodes = await listNodes(ctl);
  const top = Math.max(...nodes.map((n) => n.stateVersion));
  t.ok(
    nodes.some((n) => n.appliedVersion < top && n.gap === 0),
    'idle nodes stay at the version they applied, with gap 0',
  );
  t.ok(
    agents.slice(0, N - 1).every((a) => a.proc.alive),
    'every agent still runs',
  );
});

/**
 * A controller and three agents as real processes on 127.0.0.1: enrol, a snapshot then only deltas;
 * the controller killed -9 and restarted (agents resume without a snapshot while the log reaches
 * back, with one when it does not); an agent killed -9 mid-stream resumes from its applied version.
 */
import t from 'tap';
import { metricsText } from '../helpers/prom.js';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  adminCalls,
  meshpAsync,
  startAgent,
  startController,
  waitUntil,
  workdir,
  type AgentProc,
  type ControllerProc,
  type LogLine,
  nodes as listNodes,
  tokenFor,
} from '../helpers/grpc-procs.js';

const CONF = '/etc/web/web.conf';
const web = (content: string) => ({ name: 'web', files: [{ path: CONF, content }] });

/** Every node acked the current version; then each agent's own log has caught up to it too. */
async function converged(ctl: ControllerProc, agents: AgentProc[]) {
  const nodes = await waitUntil(`${agents.length} nodes at gap 0`, async () => {
    const nodes = await listNodes(ctl);
    return nodes.length === agents.length && nodes.every((x) => x.gap === 0) && nodes;
  });
  // Lazy fan-out: a node whose view did not change stays at the version it applied (gap 0 all the same).
  for (const a of agents) await a.proc.waitFor((l) => l.msg === 'applied' && Number(l.toVersion) >= nodes.find((n) => n.name === a.name)!.appliedVersion);
  return nodes;
}

function content(a: AgentProc): string | null {
  const f = join(a.root, CONF);
  return existsSync(f) ? readFileSync(f, 'utf8') : null;
}

const opened = (name: string) => (l: LogLine) => l.msg === 'sync stream opened' && l.node === name;

t.test('agents follow a controller through its crash and their own', async (t) => {
  const dir = workdir(t, 'cluster');
  // At debug: each agent's 'delta sent' line (at info, one 'fan-out sent' line a fan-out).
  let ctl = await startController(t, join(dir, 'ctl'), ['--log-depth', '3'], '127.0.0.1:0', 'debug');
  // The cluster's behaviour is under test here, not the CLI: admin calls from this process.
  const admin = adminCalls(() => ctl);
  let catalogueVersion = 0;
  const defineWeb = () => admin.catalogue([web(`v${++catalogueVersion}\n`)]);
  await defineWeb();

  const tokens = await Promise.all(['a1', 'a2', 'a3'].map((name) => tokenFor(ctl, [], name === 'a1')));
  const agents = ['a1', 'a2', 'a3'].map((name, i) => startAgent(t, dir, name, ctl.address, tokens[i]));
  for (const a of agents) await a.proc.waitFor((l) => l.msg === 'applied' && l.snapshot === true);
  for (const a of agents) await admin.assign(a.name, 'web');
  await converged(ctl, agents);
  await waitUntil('every agent wrote the file', () => agents.every((a) => content(a) === 'v1\n'));
  for (const a of agents) {
    const applied = a.proc.applied();
    t.equal(applied[0]?.snapshot, true, `${a.name}: the first thing received is a snapshot`);
    t.ok(applied.length > 1 && applied.slice(1).every((l) => l.snapshot === false), `${a.name}: then only deltas (${applied.length - 1})`);
  }

  // The controller dies hard and comes back on the same address.
  const marks = agents.map((a) => a.proc.lines.length);
  ctl.proc.kill('SIGKILL');
  await ctl.proc.exited;
  ctl = await startController(t, join(dir, 'ctl'), ['--log-depth', '3'], ctl.address, 'debug');
  for (const a of agents) {
    const line = await ctl.proc.waitFor(opened(a.name), 20_000);
    t.equal(line.resume, true, `${a.name} resumed where it was, no snapshot due`);
  }
  await defineWeb();
  await converged(ctl, agents);
  await waitUntil('every agent has v2', () => agents.every((a) => content(a) === 'v2\n'));
  agents.forEach((a, i) => {
    const since = a.proc.applied(marks[i]);
    t.ok(since.length >= 1, `${a.name} got the change after the restart`);
    t.ok(
      since.every((l) => l.snapshot === false),
      `${a.name}: no snapshot after the controller restart`,
    );
  });

  // An agent killed -9 mid-stream resumes from its applied version.
  const a2 = agents[1]!;
  await defineWeb();
  a2.proc.kill('SIGKILL');
  await a2.proc.exited;
  const ctlMark = ctl.proc.lines.length;
  const a2b = startAgent(t, dir, 'a2', ctl.address);
  const hello = await ctl.proc.waitFor(opened('a2'), 20_000, ctlMark);
  t.equal(hello.resume, true, 'a2 said where it was and resumed from there');
  t.ok(Number(hello.appliedVersion) > 0, `a2 resumed from version ${hello.appliedVersion}`);
  await defineWeb();
  await converged(ctl, [agents[0]!, a2b, agents[2]!]);
  await waitUntil('a2 has v4', () => content(a2b) === 'v4\n');
  t.ok(a2b.proc.applied().length >= 1 && a2b.proc.applied().every((l) => l.snapshot === false), 'a2 after its crash: deltas only');
  t.equal(a2b.proc.applied()[0]?.fromVersion, hello.appliedVersion, 'the first delta starts at the version a2 had applied');

  // A stopped agent the log no longer reaches gets a snapshot.
  const a3 = agents[2]!;
  a3.proc.kill('SIGTERM');
  // A clean stop (exit 0, 'stopped'), or — a reconcile still running when the stop's deadline came,
  // seen at a load of 18 on 2 cores — the deadline's exit, said on stderr: both are the agent's
  // documented stop (the clean one alone is asserted in plugin-loading); here what matters is that
  // the agent it leaves behind comes back.
  const stopCode = await a3.proc.exited;
  if (stopCode === 0)
    t.ok(
      a3.proc.lines.some((l) => l.msg === 'stopped'),
      'SIGTERM stops the agent cleanly',
    );
  else t.match(a3.proc.stderr, /the stop took over \d+ ms; leaving now/, `SIGTERM: exit ${stopCode}, past the stop's deadline (said so)`);
  for (let i = 0; i < 4; i++) await defineWeb();
  const a3b = startAgent(t, dir, 'a3', ctl.address);
  await a3b.proc.waitFor((l) => l.msg === 'applied');
  t.equal(a3b.proc.applied()[0]?.snapshot, true, 'beyond the log: a snapshot');
  await waitUntil('a3 has v8', () => content(a3b) === 'v8\n');

  const beforeTake = ctl.proc.lines.length;
  await admin.take('a1', 'web');
  const nodes = await converged(ctl, [agents[0]!, a2b, a3b]);
  await ctl.proc.waitFor((l) => l.msg === 'delta sent' && l.node === 'a1', 15_000, beforeTake);
  // a2 and a3 enrolled converged, but no firewall plugin holds a derived filter on them: not converged (issue 33), adopted by their report.
  t.same(
    nodes.map((n) => [n.name, n.gap, n.mode, n.firewall]),
    [
      ['a1', 0, 'adopted', 'none'],
      ['a2', 0, 'adopted', 'none'],
      ['a3', 0, 'adopted', 'none'],
    ],
    'node list --json: gap 0 for every node',
  );

  const sentSince = ctl.proc.lines.slice(beforeTake).filter((l) => l.msg === 'delta sent' || l.msg === 'snapshot sent');
  t.same(
    sentSince.map((l) => l.node),
    ['a1'],
    'taking a module on a1 sends a1 a delta and a2, a3 nothing (lazy fan-out)',
  );
  const a1Node = nodes.find((n) => n.name === 'a1')!;
  t.equal(a1Node.appliedVersion, a1Node.stateVersion, 'a1 applied the version of its change');
  t.ok(
    nodes.filter((n) => n.name !== 'a1').every((n) => n.appliedVersion < n.stateVersion && n.gap === 0),
    'a2 and a3 stay at the version they applied, and are not behind',
  );

  type Doctor = { node: { mode: string; taken: string[] }; deltas: { toVersion: number; applied: boolean; hashMatches: boolean }[]; held: unknown[] };
  const doc = await waitUntil('doctor sees the last delta applied', async () => {
    const r = await meshpAsync('doctor', 'a1', '--json', '--state', join(dir, 'ctl'), '--controller', ctl.address);
    const d = JSON.parse(r.out) as Doctor;
    const latest = d.deltas.at(-1);
    return latest && latest.toVersion === a1Node.stateVersion && latest.applied && d;
  });
  t.ok(doc.deltas.at(-1)!.hashMatches, 'doctor: the last delta sent was applied with the hash expected');
  t.same(doc.node.taken, ['web'], 'the declaration carries the taken module');
  t.equal(doc.node.mode, 'adopted', 'and the mode from the token');

  const metrics = await metricsText(ctl.metrics);
  t.match(metrics, /meshp_convergence_gap\{network="default",node="a1"\} 0/);
  t.match(metrics, /meshp_connected_agents 3/);
  t.match(metrics, /meshp_snapshots_sent_total [1-9]/);
  t.match(metrics, /meshp_deltas_sent_total [1-9]/);
});

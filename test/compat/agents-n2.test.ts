/**
 * The N-1 and N-2 agents as real processes against today's controller over real gRPC. Each is the
 * whole meshp of an earlier commit, built from git history by test/compat/build-agent.sh (run by
 * `make compat-agents`, which `make test` runs first): 63980d1 (protocol revision 1, signed hello,
 * no Declaration.converge_preview_id) and f3ee622 (said revision 1 too, but knew converge_preview_id
 * and Report.reach). Each enrols, converges to gap 0, and applies a join, a policy change (UNSCOPED)
 * and a removal (REMOVED) in hash agreement: one snapshot each, and no more.
 */
import t from 'tap';
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { Proc, adminCalls, startAgent, startController, tokenFor, waitUntil, workdir, type AgentProc, nodes as listNodes } from '../helpers/grpc-procs.js';

const OLD = [
  { name: 'old2', commit: '63980d1' },
  { name: 'old1', commit: 'f3ee622' },
];
const built = (commit: string) => join(process.env.MESHP_COMPAT_DIR ?? join(process.cwd(), '.compat'), `meshp-compat-${commit}`, 'bin/dist/main.js');
const missing = OLD.filter((o) => !existsSync(built(o.commit)));

t.test(
  'agents of two earlier commits follow today’s controller',
  { skip: missing.length ? `not built: run make compat-agents (test/compat/build-agent.sh ${missing.map((o) => o.commit).join(', ')})` : false },
  async (t) => {
    const dir = workdir(t, 'compat');
    const state = join(dir, 'ctl');
    const ctl = await startController(t, state);
    // The old agents are under test, not the CLI: the controller is scripted over the in-process Admin
    // client (tokens as `meshp token create --tag …` makes them), each call asserted to succeed.
    const admin = adminCalls(() => ctl);
    const policy = (rules: [string, string][]) => t.resolves(admin.policy(rules.map(([from, to]) => ({ from, to }))), `policy set ${JSON.stringify(rules)}`);
    await policy([['web', 'db']]);
    const webTokens = await Promise.all(OLD.map(() => tokenFor(ctl, ['web'])));

    const old: AgentProc[] = OLD.map((o, i) => {
      const base = join(dir, o.name);
      const root = join(base, 'root');
      mkdirSync(root, { recursive: true });
      const args = [
        'agent',
        '--state',
        join(base, 'state'),
        '--controller',
        ctl.address,
        '--name',
        o.name,
        '--root',
        root,
        '--firewall',
        'none',
        '--docker-socket',
        join(base, 'absent.sock'),
        '--interval',
        '1',
        '--token',
        webTokens[i]!,
      ];
      return { proc: new Proc(t, args, undefined, built(o.commit)), name: o.name, state: join(base, 'state'), root };
    });
    startAgent(t, dir, 'db1', ctl.address, await tokenFor(ctl, ['db']));
    // On a timeout the old agents' own state is said too (alive or not, their last lines): seen once at load 24, unexplained.
    const settled = (names: string[]) =>
      waitUntil(
        `${names.join(', ')} at gap 0`,
        async () => {
          const nodes = await listNodes(ctl);
          return names.every((x) => nodes.some((m) => m.name === x && m.gap === 0 && m.appliedVersion > 0)) && nodes;
        },
        60_000,
      ).catch((e: Error) => {
        const said = old.map(
          (a) => `${a.name}: ${a.proc.alive ? 'running' : 'exited'}; last lines ${JSON.stringify(a.proc.lines.slice(-3))}; stderr ${a.proc.stderr.slice(-300)}`,
        );
        throw new Error(`${e.message}\n${said.join('\n')}`);
      });
    await settled(['old2', 'old1', 'db1']);
    for (const a of old)
      t.ok(
        a.proc.lines.some((l) => l.msg === 'enrolled'),
        `${a.name} enrolled`,
      );

    const step = async (what: string, change: () => unknown, pred: (l: Record<string, unknown>) => boolean, names: string[]) => {
      const marks = old.map((a) => a.proc.lines.length);
      await change();
      for (const [i, a] of old.entries()) await a.proc.waitFor((l) => l.msg === 'applied' && pred(l), 30_000, marks[i]);
      await settled(names);
      t.pass(`${what}: both old agents applied it and are at gap 0`);
    };
    // A join both can see (web → db).
    const db2Token = await tokenFor(ctl, ['db']);
    await step(
      'a join',
      () => void startAgent(t, dir, 'db2', ctl.address, db2Token),
      (l) => Number(l.upserted) === 1,
      ['old2', 'old1', 'db1', 'db2'],
    );
    // A policy change that hides both db nodes: UNSCOPED.
    await step(
      'a policy change',
      () => policy([]),
      (l) => Number(l.unscoped) === 2 && Number(l.removed) === 0,
      ['old2', 'old1', 'db1', 'db2'],
    );
    await step(
      'the policy back',
      () => policy([['web', 'db']]),
      (l) => Number(l.upserted) === 2,
      ['old2', 'old1', 'db1', 'db2'],
    );
    // A removal: REMOVED.
    await step(
      'a removal',
      () => t.resolves(admin.remove('db2'), 'node remove db2'),
      (l) => Number(l.removed) === 1 && Number(l.unscoped) === 0,
      ['old2', 'old1', 'db1'],
    );

    const snapshots = ctl.proc.lines.filter((l) => l.msg === 'snapshot sent');
    for (const a of old) t.equal(snapshots.filter((l) => l.node === a.name).length, 1, `${a.name}: one snapshot (its first), deltas after: hashes agreed`);
    t.notOk(
      ctl.proc.lines.some((l) => l.msg === 'ack hash differs from the view computed for that version: snapshot' && old.some((a) => a.name === l.node)),
      'no ack of theirs differed',
    );
  },
);

/**
 * Issue 28's audit log, against real controllers over gRPC on 127.0.0.1: each admin change appears
 * once, with its actor, network, what changed and the state version it made; reads and previews are
 * not recorded; `--node` picks a node's changes; the log survives a restart (it is in the store, not
 * in memory) and is trimmed by age (`--audit-retention`), not by the delta log's depth; on PostgreSQL
 * two replicas keep one log. Every change is also one JSON log line (`admin change`).
 */
import t from 'tap';
import { join } from 'node:path';
import { meshpAsync, replicaState, startAgent, startController, tokenFor, waitUntil, workdir, writeJson, type ControllerProc } from '../helpers/grpc-procs.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { scrape } from '../helpers/prom.js';

interface Entry {
  at: string;
  actor: string;
  network: string;
  method: string;
  node: string | null;
  summary: string;
  stateVersion: number;
}

const cliOf = (ctl: () => ControllerProc) => {
  const cli = (...args: string[]) => meshpAsync(...args, '--state', ctl().state, '--controller', ctl().address);
  const ok = async (...args: string[]) => {
    const r = await cli(...args);
    if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
    return r.out;
  };
  const audit = async (...args: string[]) => (JSON.parse(await ok('audit', '--json', ...args)) as { entries: Entry[] }).entries;
  return { cli, ok, audit };
};

t.test('every admin change once, with its actor and version; kept over a restart; trimmed by age', async (t) => {
  const dir = workdir(t, 'audit');
  const state = join(dir, 'ctl');
  let ctl = await startController(t, state);
  const { ok, audit, cli } = cliOf(() => ctl);
  const agent = startAgent(t, dir, 'n1', ctl.address, await tokenFor(ctl, ['web']));
  await waitUntil('n1 enrolled', async () => (await ok('node', 'list', '--json')).includes('"n1"'), 60_000);

  await ok('catalogue', 'add', writeJson(dir, 'web.json', { name: 'web', files: [{ path: '/etc/web.conf', content: 'x\n' }] }), '--yes');
  await ok('module', 'assign', 'n1', 'web', '--yes');
  await ok('policy', 'set', writeJson(dir, 'p.json', { rules: [{ from: 'web', to: 'web' }] }), '--yes');
  await ok('dns', 'set', writeJson(dir, 'dns.json', { records: [{ name: 'printer', type: 'A', value: '100.96.9.9' }] }), '--yes');
  // Reads and previews are no change: not recorded.
  await ok('policy', 'get');
  await ok('policy', 'set', join(dir, 'p.json'), '--preview');
  await ok('dns', 'set', join(dir, 'dns.json'), '--preview');
  await ok('node', 'list');
  t.equal((await cli('module', 'assign', 'n1', 'nothing', '--yes')).code, 1, 'a refused change');

  const entries = await audit();
  const made = entries.map((e) => e.method);
  // createToken (tokenFor) first, then the changes in order; the refused one is not there.
  t.same(
    made,
    ['createToken', 'addCatalogue', 'assignModule', 'setPolicy', 'setDns'],
    'each change once, in order; reads, previews and a refusal are not recorded',
  );
  t.match(entries.at(-1)!.summary, 'dns set: domain default, 1 record(s), 0 split domain(s), 0 nameserver(s)', "the DNS change's summary");
  t.ok(
    entries.every((e) => e.actor === 'admin' && e.network === 'default'),
    'the actor and network of each',
  );
  const [, added, assigned, policy] = entries;
  t.match(assigned, { node: 'n1', summary: 'assign module web on n1' });
  t.match(policy, { node: null, summary: 'policy: 0 rule(s) -> 1 rule(s), 0 test(s)' });
  t.match(added, { summary: 'catalogue add web' });
  const got = JSON.parse(await ok('policy', 'get', '--json')) as { policyVersion: number };
  t.equal(policy!.stateVersion, got.policyVersion, 'the state version each change made');
  t.ok(assigned!.stateVersion < policy!.stateVersion && added!.stateVersion < assigned!.stateVersion, 'versions in the order of the changes');
  t.same(
    (await audit('--node', 'n1')).map((e) => e.method),
    ['assignModule'],
    '--node: the changes about that node',
  );
  const last = entries.at(-1)!;
  t.same(await audit('--since', new Date(Date.parse(last.at) + 1).toISOString()), [], '--since: none after the last');
  t.equal((await audit('--since', '1h')).length, 5, '--since 1h: all of them');
  t.ok(
    ctl.proc.lines.some((l) => l.msg === 'admin change' && (l.audit as Entry | undefined)?.method === 'setPolicy'),
    'each change is a JSON log line too',
  );
  const human = await ok('audit');
  t.match(human, /AT\s+ACTOR\s+METHOD\s+NODE\s+VERSION\s+CHANGE/);
  t.match(human, /admin\s+assignModule\s+n1\s+\d+\s+assign module web on n1/);

  // A restart, with a retention of 5 s: the log is read from the store (no change yet: nothing trimmed).
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;
  ctl = await startController(t, state, ['--audit-retention', '5s'], ctl.address);
  t.same(await audit(), entries, 'the log survives the restart, whole');
  // Once the newest is older than the retention, the next change trims every entry before it.
  await waitUntil('the newest entry older than 5 s', () => Date.now() > Date.parse(policy!.at) + 5_500, 30_000);
  await ok('module', 'unassign', 'n1', 'web', '--yes');
  t.same(
    (await audit()).map((e) => e.method),
    ['unassignModule'],
    'entries past the retention are trimmed by age',
  );
  t.equal(
    (await cli('controller', 'serve', '--state', join(dir, 'x'), '--listen', '127.0.0.1:0', '--audit-retention', 'soon')).code,
    2,
    'a retention that is no duration: usage',
  );
  t.ok(agent.proc.alive, 'the agent still runs');
});

const missing = postgresMissing();

/** A PostgreSQL cluster of the test's own and two controllers on one database in it. */
async function replicas(t: Parameters<typeof startPostgres>[0], name: string) {
  const cluster = startPostgres(t);
  const url = await cluster.createDb('meshp');
  const dir = workdir(t, name);
  const a = await startController(t, join(dir, 'a'), ['--store', url]);
  replicaState(join(dir, 'a'), join(dir, 'b'));
  const b = await startController(t, join(dir, 'b'), ['--store', url]);
  return { cluster, dir, a, b };
}

t.test('on PostgreSQL, two replicas keep one audit log', { skip: missing ? `needs a PostgreSQL cluster of its own: ${missing}` : false }, async (t) => {
  const { cluster, dir, a, b } = await replicas(t, 'audit-pg');
  const onA = cliOf(() => a);
  const onB = cliOf(() => b);
  await onA.ok('policy', 'set', writeJson(dir, 'p1.json', { rules: [{ from: 'x', to: 'y' }] }), '--yes');
  await onB.ok(
    'policy',
    'set',
    writeJson(dir, 'p2.json', {
      rules: [
        { from: 'x', to: 'y' },
        { from: 'y', to: 'x' },
      ],
    }),
    '--yes',
  );
  await onA.ok('network', 'create', 'lab');
  const fromA = await onA.audit();
  const fromB = await onB.audit();
  t.same(fromA, fromB, 'both replicas read one log');
  t.same(
    fromA.map((e) => e.summary),
    ['policy: 0 rule(s) -> 1 rule(s), 0 test(s)', 'policy: 1 rule(s) -> 2 rule(s), 0 test(s)'],
    'changes made through either, in order, once each',
  );
  t.same(
    (await onB.audit('--network', 'lab')).map((e) => e.method),
    ['createNetwork'],
    'by network',
  );
  const rows = await cluster.query<{ n: string }>('meshp', 'SELECT count(*) AS n FROM audit_log');
  t.equal(Number(rows[0]!.n), 3, 'the rows are in the database');
});

t.test(
  'on PostgreSQL, a change computed again after the other replica committed first is recorded once',
  { skip: missing ? `needs a PostgreSQL cluster of its own: ${missing}` : false },
  async (t) => {
    const { cluster, a, b } = await replicas(t, 'audit-pg-race');
    const [ca, cb] = await Promise.all([a.admin!(), b.admin!()]);
    // Both replicas change one network's policy at once, round after round, until the guard has been beaten
    // (the other committed between a change's read and its commit) a few times: each such change is computed again.
    const recomputed = async () =>
      (await Promise.all([a, b].map(async (c) => (await scrape(c.metrics)).value('meshp_controller_store_changes_recomputed_total') ?? 0))).reduce(
        (x, y) => x + y,
        0,
      );
    let made = 0;
    let refused = 0;
    let k = 0;
    for (let round = 0; round < 40 && (await recomputed()) < 3; round++) {
      const calls = [ca, cb, ca, cb, ca, cb].map((c) => {
        k++;
        return c.call('setPolicy', { network: 'default', rules: [{ fromTag: 'x', toTag: `t${k}`, ports: [] }], tests: [], previewId: '' });
      });
      for (const r of await Promise.allSettled(calls)) r.status === 'fulfilled' ? made++ : refused++;
    }
    const again = await recomputed();
    t.ok(again > 0, `the replicas raced: ${again} change(s) computed again after the other committed first`);
    const rows = await cluster.query<{ n: string }>('meshp', "SELECT count(*) AS n FROM audit_log WHERE method = 'setPolicy'");
    t.equal(Number(rows[0]!.n), made, `one record per change made (${made} made, ${refused} refused), none for a computation thrown away`);
    const versions = await cluster.query<{ v: string }>('meshp', "SELECT state_version AS v FROM audit_log WHERE method = 'setPolicy' ORDER BY state_version");
    t.equal(new Set(versions.map((r) => r.v)).size, made, 'each with the version its commit made, no two alike');
  },
);

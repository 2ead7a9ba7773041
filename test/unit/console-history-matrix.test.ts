/**
 * Issue 30's two computed views, without a browser: the reachability matrix the controller gives
 * the policy page (core's reachMatrix: who reaches whom, on which ports, the control-node's foundation
 * ports to every member), and the convergence history the console keeps for its chart (each node's
 * gap and the fleet's p99 per sample, for a stated window, older samples dropped). In the browser:
 * test/integration/console-browser.test.ts.
 */
import t from 'tap';
import { CONTROL_NODE_TAG, FOUNDATION_REACH, reachMatrix, type MemberRecord } from '@meshp/core/delta';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConvergenceHistory, historySpan, p99, type GapOf } from '../../plugins/controller/src/console/history.js';
import { SqliteHistoryStore } from '../../plugins/controller/src/console/history-store.js';
import { consoleHistorySpan } from '../../bin/src/remote/controller.js';

const member = (id: string, tags: string[]): MemberRecord => ({
  id,
  nodeKey: `k-${id}`,
  addresses: [],
  tags,
  endpoints: [],
  mode: 'adopted',
  assigned: [],
  taken: [],
  settings: { ports: {} },
});

t.test('the matrix: per node, each peer it may reach and on which ports, and only those', async (t) => {
  const members = [member('w1', ['web']), member('d1', ['db']), member('o1', ['ops']), member('ctl', [CONTROL_NODE_TAG])];
  const m = reachMatrix(members, [
    { from: 'web', to: 'db', ports: ['5432'] },
    { from: 'ops', to: 'web' },
    { from: 'ops', to: 'db', ports: ['22/tcp'] },
  ]);
  t.same(
    m.map((r) => [r.node, r.peers.map((p) => `${p.peer}:${p.ports.join(',')}`)]),
    [
      ['ctl', []],
      ['d1', [`ctl:${FOUNDATION_REACH}`]],
      ['o1', [`ctl:${FOUNDATION_REACH}`, 'd1:22/tcp', 'w1:*']],
      ['w1', [`ctl:${FOUNDATION_REACH}`, 'd1:5432/tcp,5432/udp']],
    ],
    'sorted by name; a rule without ports is every port; d1 reaches only the control-node (reached is not reaching)',
  );
  t.same(
    reachMatrix(
      [members[2]!, members[0]!],
      [
        { from: 'ops', to: 'web' },
        { from: 'web', to: 'db', ports: ['5432'] },
      ],
      [members[1]!, members[0]!],
    ).map((r) => [r.node, r.peers.map((p) => `${p.peer}:${p.ports.join(',')}`)]),
    [
      ['o1', ['w1:*']],
      ['w1', ['d1:5432/tcp,5432/udp']],
    ],
    'rows and columns given apart (a filtered matrix): only those pairs, each side sorted by name',
  );
  t.same(
    reachMatrix(members, []).map((r) => r.peers.map((p) => p.peer)),
    [[], ['ctl'], ['ctl'], ['ctl']],
    'no policy: only the mesh’s own rule',
  );
});

t.test('p99 is the nearest rank', async (t) => {
  t.equal(p99([]), 0);
  t.equal(p99([3]), 3);
  t.equal(p99([0, 5]), 5, 'of two nodes, the worse');
  const hundred = Array.from({ length: 100 }, (_, i) => i);
  t.equal(p99(hundred), 98, 'of 100 nodes, the second-worst');
});

t.test('the history keeps each node’s gap and the p99 per sample, for its window only', async (t) => {
  let now: GapOf[] = [
    { network: 'default', node: 'a', gap: 0 },
    { network: 'default', node: 'b', gap: 2 },
    { network: 'other', node: 'x', gap: 7 },
  ];
  const h = new ConvergenceHistory({ gaps: () => now, sampleMs: 60_000, windowMs: 10_000 });
  t.teardown(() => h.close());
  const t0 = Date.now();
  h.sample(t0 + 1_000);
  now = [
    { network: 'default', node: 'a', gap: 4 },
    { network: 'default', node: 'c', gap: 1 },
  ];
  h.sample(t0 + 2_000);
  const v = h.view('default');
  t.equal(v.at.length, 3, 'the sample at start and the two taken');
  t.same(v.p99, [2, 2, 4]);
  t.same(
    v.nodes.map((n) => [n.name, n.gaps]),
    [
      ['a', [0, 0, 4]],
      ['b', [2, 2, null]],
      ['c', [null, null, 1]],
    ],
    'a node not a member at a sample has no value there',
  );
  t.same(h.view('other').p99, [7, 7], 'per network');
  t.same(h.view('none').at, [], 'a network never seen: nothing');
  h.sample(t0 + 11_500);
  t.same(h.view('default').p99, [4, 4], 'samples older than the window are gone');
  t.equal(v.windowSeconds, 10);
});

t.test('a sample that fails on the timer is missed and told, not thrown out of the timer', async (t) => {
  let calls = 0;
  const errors: unknown[] = [];
  const h = new ConvergenceHistory({
    gaps: () => {
      calls++;
      if (calls > 1) throw new Error('the store went away');
      return [{ network: 'default', node: 'a', gap: 2 }];
    },
    sampleMs: 10,
    onError: (e) => errors.push(e),
  });
  t.teardown(() => h.close());
  await new Promise((r) => setTimeout(r, 100));
  t.ok(calls > 1, 'the timer sampled again');
  t.ok(errors.length > 0, 'each failed sample was told');
  t.match(String(errors[0]), /the store went away/);
  t.same(h.view('default').p99, [2], 'the samples taken before stay, the failed ones are missed');
});

t.test('the history kept in the SQLite store: a new history (a restart) reads back the window, older rows trimmed', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'con2-hist-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'controller.db');
  const gaps: GapOf[] = [
    { network: 'default', node: 'a', gap: 3 },
    { network: 'default', node: 'b', gap: 0 },
  ];
  const errors: unknown[] = [];
  const first = new ConvergenceHistory({
    gaps: () => gaps,
    sampleMs: 60_000,
    windowMs: 30_000,
    book: new SqliteHistoryStore(file),
    onError: (e) => errors.push(e),
  });
  const t0 = Date.now();
  first.sample(t0 + 1_000);
  await new Promise((r) => setImmediate(r));
  const before = first.view('default');
  first.close();
  t.equal(before.at.length, 2);
  const second = new ConvergenceHistory({
    gaps: () => [{ network: 'default', node: 'a', gap: 1 }],
    sampleMs: 60_000,
    windowMs: 30_000,
    book: new SqliteHistoryStore(file),
  });
  const after = second.view('default');
  t.same(after.at.slice(0, 2), before.at, 'the samples of the run before are read back');
  t.same(
    after.nodes.map((n) => [n.name, n.gaps]),
    [
      ['a', [3, 3, 1]],
      ['b', [0, 0, null]],
    ],
    "each node's gaps as they were, then the new run's sample",
  );
  second.sample(t0 + 40_000);
  await new Promise((r) => setImmediate(r));
  second.close();
  const rows = new SqliteHistoryStore(file);
  t.teardown(() => rows.close());
  t.same(
    rows.loadHistory(0).map((r) => r.at),
    [t0 + 40_000],
    'the store is trimmed by the window at each write',
  );
  t.same(errors, [], 'no write failed');
});

t.test('--console-history and --console-sample: durations that make sense, else MESHP_USAGE', async (t) => {
  t.same(consoleHistorySpan(undefined, undefined), { windowMs: 3_600_000, sampleMs: 5_000 }, 'an hour, every 5 s by default');
  t.same(consoleHistorySpan('2h', '10s'), { windowMs: 7_200_000, sampleMs: 10_000 });
  for (const [w, s, msg] of [
    ['1h', '0s', /--console-sample is at least 1s/],
    ['1h', 'soon', /--console-sample soon is not a duration/],
    ['-5m', '5s', /--console-history -5m is not a duration/],
    ['5s', '10s', /--console-history is a duration at least as long as --console-sample/],
    ['30d', '1s', /at most 17280 samples/],
  ] as const) {
    t.throws(() => consoleHistorySpan(w, s), { code: 'MESHP_USAGE', message: msg }, `${w} every ${s}: refused`);
  }
  t.ok(historySpan(60_000, 1_000), 'the bounds themselves are allowed');
});

t.test('a store that cannot give back the history: told, and the chart starts again', async (t) => {
  const errors: unknown[] = [];
  const h = new ConvergenceHistory({
    gaps: () => [{ network: 'default', node: 'a', gap: 1 }],
    sampleMs: 60_000,
    book: {
      loadHistory: () => {
        throw new Error('database disk image is malformed');
      },
      appendHistory: () => undefined,
      close: () => undefined,
    },
    onError: (e) => errors.push(e),
  });
  t.teardown(() => h.close());
  t.match(String(errors[0]), /malformed/, 'told');
  t.same(h.view('default').p99, [1], "only this run's sample");
});

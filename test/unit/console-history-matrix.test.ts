/**
 * Issue 30's two computed views, without a browser: the reachability matrix the controller gives
 * the policy page (core's reachMatrix: who reaches whom, on which ports, the control-node's foundation
 * ports to every member), and the convergence history the console keeps for its chart (each node's
 * gap and the fleet's p99 per sample, for a stated window, older samples dropped). In the browser:
 * test/integration/console-browser.test.ts.
 */
import t from 'tap';
import { CONTROL_NODE_TAG, FOUNDATION_REACH, reachMatrix, type MemberRecord } from '@meshp/core/delta';
import { ConvergenceHistory, p99, type GapOf } from '../../plugins/controller/src/console/history.js';

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

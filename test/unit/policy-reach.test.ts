/**
 * The policy's reachability diff and its tests (issue 28), as core computes them for the controller:
 * per node the peers that enter and leave its view (the scope the deltas use) and the ports it gains
 * and loses on each peer; a test accepted or denied as the tunnel's filter reads the rules. Against a
 * real controller and agents: test/integration/policy-preview.test.ts.
 */
import t from 'tap';
import { CONTROL_NODE_TAG, policyPreviewId, reachDiff, runPolicyTests, tagsPreviewId, tagsReachDiff, type MemberRecord } from '@meshp/core/delta';
import { checkPolicyTests, readPolicyDocument } from '@meshp/core/schema';

const member = (id: string, tags: string[], ports: Record<string, number> = {}): MemberRecord => ({
  id,
  nodeKey: `k-${id}`,
  addresses: [],
  tags,
  endpoints: [],
  mode: 'adopted',
  assigned: [],
  taken: [],
  settings: { ports },
});

const members = [member('w1', ['web']), member('w2', ['web']), member('d1', ['db']), member('o1', ['ops'])];

t.test('the diff names, per node, the peers and ports it gains and loses, and only those nodes', async (t) => {
  const before = [
    { from: 'web', to: 'db', ports: ['5432'] },
    { from: 'ops', to: 'web', ports: ['22/tcp'] },
  ];
  const after = [
    { from: 'web', to: 'db', ports: ['5432', '6432/tcp'] },
    { from: 'ops', to: 'db' },
  ];
  t.same(reachDiff(members, before, after), [
    { node: 'd1', peersGained: ['o1'], peersLost: [], portsGained: [], portsLost: [] },
    {
      node: 'o1',
      peersGained: ['d1'],
      peersLost: ['w1', 'w2'],
      portsGained: [{ peer: 'd1', ports: ['*'] }],
      portsLost: [
        { peer: 'w1', ports: ['22/tcp'] },
        { peer: 'w2', ports: ['22/tcp'] },
      ],
    },
    { node: 'w1', peersGained: [], peersLost: ['o1'], portsGained: [{ peer: 'd1', ports: ['6432/tcp'] }], portsLost: [] },
    { node: 'w2', peersGained: [], peersLost: ['o1'], portsGained: [{ peer: 'd1', ports: ['6432/tcp'] }], portsLost: [] },
  ]);
  t.same(reachDiff(members, before, before), [], 'the same policy: no change');
  // Every port narrowed to one: what is lost is said as every port but the one kept.
  t.same(reachDiff(members, [{ from: 'ops', to: 'db' }], [{ from: 'ops', to: 'db', ports: ['22/tcp'] }]), [
    { node: 'o1', peersGained: [], peersLost: [], portsGained: [], portsLost: [{ peer: 'd1', ports: ['* but 22/tcp'] }] },
  ]);
});

t.test('the preview id moves with the policy in force, the proposal, its tests and the membership, and with nothing else', async (t) => {
  const p = [{ from: 'web', to: 'db' }];
  const id = policyPreviewId('n', [], p, [], members);
  t.equal(policyPreviewId('n', [], p, [], [...members].reverse()), id, 'the order members are listed in does not count');
  t.equal(
    policyPreviewId(
      'n',
      [],
      p,
      [],
      members.map((m) => ({ ...m, endpoints: ['192.0.2.1:51820'] })),
    ),
    id,
    'an endpoint is not what scope reads',
  );
  t.not(policyPreviewId('n', p, p, [], members), id, 'another policy in force');
  t.not(policyPreviewId('n', [], [], [], members), id, 'another proposal');
  t.not(policyPreviewId('n', [], p, [{ from: 'w1', to: 'd1', port: '80/tcp', expect: 'accept' }], members), id, 'other tests');
  t.not(policyPreviewId('n', [], p, [], [...members, member('w3', ['web'])]), id, 'a member joined');
  t.not(
    policyPreviewId(
      'n',
      [],
      p,
      [],
      members.map((m) => (m.id === 'o1' ? { ...m, tags: ['web'] } : m)),
    ),
    id,
    "a member's tags changed",
  );
});

t.test('a test is accepted or denied as the filter reads the rules, each result saying why', async (t) => {
  const rules = [
    { from: 'web', to: 'db', ports: ['5432', '8000-8100/tcp'] },
    { from: 'ops', to: 'web' },
  ];
  const tests = checkPolicyTests([
    { from: 'w1', to: 'd1', port: 5432, expect: 'accept' },
    { from: 'w1', to: 'd1', port: '5432/udp', expect: 'accept' },
    { from: 'tag:web', to: 'tag:db', port: '8080', expect: 'accept' },
    { from: 'w1', to: 'd1', port: '8080/udp', expect: 'deny' },
    { from: 'd1', to: 'w1', port: '22', expect: 'accept' },
    { from: 'o1', to: 'tag:web', port: '22', expect: 'accept' },
    { from: 'ghost', to: 'd1', port: '22', expect: 'deny' },
  ]);
  const r = runPolicyTests(rules, tests, members);
  t.same(
    r.map((x) => [x.passed, x.got]),
    [
      [true, 'accept'],
      [true, 'accept'],
      [true, 'accept'],
      [true, 'deny'],
      [false, 'deny'],
      [true, 'accept'],
      [false, 'unknown'],
    ],
  );
  t.match(r[0]!.reason, /accepted by the rule web -> db ports 5432,8000-8100\/tcp/);
  t.match(r[4]!.reason, /no rule lets db reach web on 22\/tcp/);
  t.match(r[6]!.reason, /no node named ghost/);
  // The mesh's own rule: a control-node's foundation ports are reached by every member, whatever the policy.
  const ctl = member('c', [CONTROL_NODE_TAG], { store: 5432, tunnel: 51820 });
  const [x] = runPolicyTests([], checkPolicyTests([{ from: 'w1', to: 'c', port: 5432, expect: 'deny' }]), [...members, ctl]);
  t.equal(x!.got, 'accept', "a control-node's foundation port is accepted under an empty policy");
  t.match(x!.reason, /mesh's own rule/);
});

t.test('the tests section is schema-checked and bounded', async (t) => {
  t.same(readPolicyDocument({ rules: [], tests: [{ from: 'a', to: 'tag:b', port: 80, expect: 'deny' }] }).tests, [
    { from: 'a', to: 'tag:b', port: '80/tcp', expect: 'deny' },
  ]);
  for (const [bad, field] of [
    [{ from: 'a', to: 'b', port: 80, expect: 'allow' }, /expect/],
    [{ from: 'a', to: 'b', port: '80-90', expect: 'deny' }, /port/],
    [{ from: 'a', to: 'b', port: 70000, expect: 'deny' }, /port/],
    [{ from: 'tag:', to: 'b', port: 80, expect: 'deny' }, /from/],
    [{ from: 'a', to: 'b', expect: 'deny' }, /port/],
    [{ from: 'a', to: 'b', port: 80, expect: 'deny', note: 'x' }, /note/],
  ] as const) {
    t.throws(() => readPolicyDocument({ rules: [], tests: [bad] }), { code: 'MESHP_POLICY_INVALID', message: field }, JSON.stringify(bad));
  }
  const many = Array.from({ length: 1001 }, () => ({ from: 'a', to: 'b', port: 80, expect: 'deny' }));
  t.throws(() => readPolicyDocument({ rules: [], tests: many }), { code: 'MESHP_POLICY_INVALID' }, 'more than 1,000 tests');
});

t.test("a node's tags changing under the same policy: the diff of the pairs it is an end of, and an id that moves with any tags", async (t) => {
  const rules = [
    { from: 'web', to: 'db', ports: ['5432'] },
    { from: 'ops', to: 'web', ports: ['22/tcp'] },
    { from: 'ops', to: 'ops' },
  ];
  t.same(
    tagsReachDiff(members, rules, 'o1', ['web', 'ops']),
    [
      { node: 'd1', peersGained: ['o1'], peersLost: [], portsGained: [], portsLost: [] },
      { node: 'o1', peersGained: ['d1'], peersLost: [], portsGained: [{ peer: 'd1', ports: ['5432/tcp', '5432/udp'] }], portsLost: [] },
    ],
    'a tag added: only what it brings; o1 keeps w1 and w2 on 22',
  );
  t.same(
    tagsReachDiff(members, rules, 'w1', []),
    [
      { node: 'd1', peersGained: [], peersLost: ['w1'], portsGained: [], portsLost: [] },
      { node: 'o1', peersGained: [], peersLost: ['w1'], portsGained: [], portsLost: [{ peer: 'w1', ports: ['22/tcp'] }] },
      { node: 'w1', peersGained: [], peersLost: ['d1', 'o1'], portsGained: [], portsLost: [{ peer: 'd1', ports: ['5432/tcp', '5432/udp'] }] },
    ],
    'every tag taken: both ways, the node and the peers that saw it',
  );
  t.same(tagsReachDiff(members, rules, 'w1', ['web']), [], 'the same tags: no change');
  t.same(tagsReachDiff(members, rules, 'nobody', ['web']), [], 'a node that is none: none');
  const id = tagsPreviewId('default', rules, members, 'o1', ['web']);
  t.equal(tagsPreviewId('default', rules, members, 'o1', ['web']), id, 'the same inputs: the same id');
  t.not(tagsPreviewId('default', rules, members, 'o1', ['db']), id, 'other tags asked: another id');
  t.not(tagsPreviewId('default', rules, [...members.slice(1), member('w1', ['web', 'x'])], 'o1', ['web']), id, "another node's tags moved: another id");
  t.not(tagsPreviewId('default', rules.slice(1), members, 'o1', ['web']), id, 'the policy moved: another id');
  t.not(tagsPreviewId('default', rules, members.slice(0, 3), 'o1', ['web']), id, 'the membership moved: another id');
});

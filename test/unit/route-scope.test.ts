/**
 * Issue 26, the seed-000 rule for route groups: a node is sent a route group only when its policy
 * lets it use it (a rule to `route:NAME`) or it serves it; a node that may use it has the group's via
 * nodes in its view, the router has its users, and nobody else learns of the LAN. The incremental
 * deltas that grant and revoke a group leave each view what a fresh snapshot would be.
 */
import t from 'tap';
import type { RouteGroups, StateDelta } from '@meshp/core';
import { CONTROL_NODE_TAG, DeltaApplier, REMOVAL_REASON } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { StateDelta as WireDelta } from '@meshp/protocol';

const LAN = { name: 'lan', prefixes: ['192.168.77.0/24'], viaPeers: ['r1', 'r2'], noMasquerade: false };

/** Network n: control-node cn, a (tag user), b (tag other), routers r1 and r2 (tag router); a may use route:lan, b may not. */
function setup() {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  c.join('n', { id: 'cn', nodeKey: 'kcn', tags: [CONTROL_NODE_TAG] });
  for (const [id, tag] of [
    ['a', 'user'],
    ['b', 'other'],
    ['r1', 'router'],
    ['r2', 'router'],
  ] as const)
    c.join('n', { id, nodeKey: `k${id}`, tags: [tag] });
  c.setPolicy('n', [{ from: 'user', to: 'route:lan', ports: ['80/tcp'] }]);
  return c;
}

/** What the controller has for the node, through the wire's encoding, applied and acked (the ack's hash must match). */
function sync(c: Controller, agent: DeltaApplier, node: string): StateDelta | null {
  const d = c.deltaFor('n', node);
  if (!d) return null;
  const r = agent.receive(WireDelta.decode(WireDelta.encode(d as never).finish()) as unknown as StateDelta);
  if (r.status !== 'applied') throw new Error(`not applied: ${JSON.stringify(r)}`);
  const ack = c.ack('n', node, r.ack.appliedVersion, r.ack.stateHash);
  if (!ack.accepted || ack.snapshotPending) throw new Error(`ack of ${node} not accepted: the view's hash is not the controller's`);
  return d;
}

const groups = (a: DeltaApplier): RouteGroups['groups'] => a.view.components.routeGroups?.groups ?? [];
const peers = (a: DeltaApplier): string[] => [...a.view.peers.keys()].sort();
/** The view the node holds is the one a snapshot now would give it. */
const sameAsSnapshot = (c: Controller, agent: DeltaApplier, node: string) => c.snapshotOf('n', node).hash === agent.view.hash();

function agents(c: Controller) {
  const out = new Map(['a', 'b', 'r1', 'r2'].map((id) => [id, new DeltaApplier()]));
  for (const [id, ag] of out) sync(c, ag, id);
  return out;
}

t.test('a node whose policy does not allow the group gets neither the group nor its via peers; the one allowed gets both, the primary first', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  const ag = agents(c);
  t.same(groups(ag.get('a')!), [{ name: 'lan', prefixes: ['192.168.77.0/24'], viaPeers: ['r1', 'r2'], noMasquerade: false }], 'a uses lan: r1 is the primary');
  t.same(peers(ag.get('a')!), ['cn', 'r1', 'r2'], "a has the via nodes in its view, though no rule names the routers' tag");
  t.equal(ag.get('a')!.view.peer('r1')?.inboundOnly, false, 'a may reach r1 (it sends the prefixes there)');
  t.same(groups(ag.get('b')!), [], 'b is not told of the LAN');
  t.same(peers(ag.get('b')!), ['cn'], 'nor given the routers');
  t.same(
    groups(ag.get('r1')!),
    [{ name: 'lan', prefixes: ['192.168.77.0/24'], viaPeers: ['r1', 'r2'], noMasquerade: false }],
    'r1 is told the group it serves',
  );
  t.same(peers(ag.get('r1')!), ['a', 'cn'], 'r1 has its user, not b, not the other router');
  t.equal(ag.get('r1')!.view.peer('a')?.inboundOnly, true, 'r1 has a inbound only: a reaches through it, r1 reaches nothing on a');
  t.same(
    ag.get('r1')!.view.components.filter?.rules,
    [{ sourceTags: ['user'], destinationTags: ['route:lan'], ports: ['80/tcp'] }],
    "r1's filter says who may reach the LAN through it (its tunnel enforces it on the forwarded path only)",
  );
  t.same(ag.get('a')!.view.components.filter?.rules, [], 'a, a user, is given no such rule');
  for (const [id, a] of ag) t.ok(sameAsSnapshot(c, a, id), `${id}'s view is its snapshot`);
});

t.test('the group declared after the nodes synced is sent only to its users and its via nodes, incrementally', async (t) => {
  const c = setup();
  const ag = agents(c);
  const before = c.stateVersion('n');
  const preview = c.setRouteGroup('n', LAN, true);
  t.same(preview.changedNodes, ['a', 'r1', 'r2'], 'the preview names the users and the via nodes');
  t.equal(c.stateVersion('n'), before, 'a preview changes nothing');
  t.equal(c.deltaFor('n', 'a'), null, 'and sends nothing');
  c.setRouteGroup('n', LAN);
  const da = sync(c, ag.get('a')!, 'a')!;
  t.not(da.fromVersion, 0, 'a delta, not a snapshot');
  t.same(da.upsertPeers.map((p) => p.id).sort(), ['r1', 'r2'], 'the via nodes come into a view in the same delta as the group');
  t.same(
    da.routeGroups?.groups.map((g) => g.name),
    ['lan'],
  );
  const db = sync(c, ag.get('b')!, 'b');
  t.ok(!db || (db.routeGroups === undefined && db.upsertPeers.length === 0), 'b is sent no group and no peer');
  for (const id of ['r1', 'r2']) sync(c, ag.get(id)!, id);
  for (const [id, a] of ag) t.ok(sameAsSnapshot(c, a, id), `${id}'s view is its snapshot`);
});

t.test('a policy change that grants the group brings the group and the via peers in one delta; one that revokes it takes both away', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  const ag = agents(c);
  c.setPolicy('n', [
    { from: 'user', to: 'route:lan', ports: ['80/tcp'] },
    { from: 'other', to: 'route:lan' },
  ]);
  const granted = sync(c, ag.get('b')!, 'b')!;
  t.same(granted.upsertPeers.map((p) => p.id).sort(), ['r1', 'r2']);
  t.same(
    groups(ag.get('b')!).map((g) => g.name),
    ['lan'],
  );
  sync(c, ag.get('r1')!, 'r1');
  t.same(peers(ag.get('r1')!), ['a', 'b', 'cn'], 'r1 gains b as a user');
  t.same(
    ag.get('r1')!.view.components.filter?.rules.map((r) => r.sourceTags[0]),
    ['other', 'user'],
    "and b's tag in the rules of its forwarded path, in the same delta",
  );

  c.setPolicy('n', [{ from: 'other', to: 'route:lan' }]);
  const revoked = sync(c, ag.get('a')!, 'a')!;
  t.same(
    revoked.removePeers.map((p) => [p.id, p.reason]),
    [
      ['r1', REMOVAL_REASON.UNSCOPED],
      ['r2', REMOVAL_REASON.UNSCOPED],
    ],
    'the routers are unscoped from a, not removed',
  );
  t.same(groups(ag.get('a')!), [], 'and the group is gone from it in the same delta');
  for (const id of ['b', 'r1', 'r2']) sync(c, ag.get(id)!, id);
  for (const [id, a] of ag) t.ok(sameAsSnapshot(c, a, id), `${id}'s view is its snapshot`);
});

t.test('the primary is the first via node that is a member: r1 leaving makes r2 primary in the delta to the users', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  const ag = agents(c);
  t.equal(c.routeGroups('n')[0]?.primary, 'r1');
  c.leave('n', 'r1');
  const d = sync(c, ag.get('a')!, 'a')!;
  t.same(d.routeGroups?.groups[0]?.viaPeers, ['r2'], 'r2 is now first');
  t.same(
    d.removePeers.map((p) => p.id),
    ['r1'],
  );
  const status = c.routeGroups('n')[0]!;
  t.equal(status.primary, 'r2');
  t.same(status.missingVia, ['r1'], 'the group still names r1, shown as not a member');
  t.same(status.users, ['a']);
  t.ok(sameAsSnapshot(c, ag.get('a')!, 'a'));
});

t.test('a group is refused, coded, when it is not valid, overlaps another or the private range, or names a via node that is not a member', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  const refuse = (g: Partial<typeof LAN>, code: string, msg: RegExp) =>
    t.throws(() => c.setRouteGroup('n', { ...LAN, name: 'other', ...g }), { code, message: msg });
  refuse({ prefixes: ['192.168.77.0/25'] }, 'MESHP_ROUTE_INVALID', /overlaps a prefix of route group lan/);
  refuse({ prefixes: ['100.96.4.0/24'] }, 'MESHP_ROUTE_INVALID', /private range/);
  refuse({ prefixes: ['10.1.0.1/24'] }, 'MESHP_ROUTE_INVALID', /host bits set: the prefix is 10\.1\.0\.0\/24/);
  refuse({ prefixes: ['0.0.0.0/0', '10.2.0.0/16'] }, 'MESHP_ROUTE_INVALID', /0\.0\.0\.0\/0 is a default route: an exit node's group holds only/);
  refuse({ prefixes: ['10.1.0.0'] }, 'MESHP_ROUTE_INVALID', /not a prefix/);
  refuse({ prefixes: [] }, 'MESHP_ROUTE_INVALID', /prefixes/);
  refuse({ prefixes: ['10.2.0.0/16', '10.2.0.0/16'] }, 'MESHP_ROUTE_INVALID', /given twice/);
  refuse({ prefixes: ['10.2.0.0/16'], viaPeers: ['nobody'], noMasquerade: false }, 'MESHP_NOT_FOUND', /no node nobody in n/);
  refuse({ prefixes: ['10.2.0.0/16'], name: 'has space' }, 'MESHP_ROUTE_INVALID', /name/);
  refuse({ prefixes: Array.from({ length: 257 }, (_, i) => `10.3.${i % 256}.${i >= 256 ? 128 : 0}/25`) }, 'MESHP_ROUTE_INVALID', /prefixes/);
  t.same(
    c.routeGroups('n').map((g) => g.group.name),
    ['lan'],
    'nothing refused was stored',
  );
  c.setRouteGroup('n', { name: 'v6', prefixes: ['fd00:77::/64'], viaPeers: ['r2'], noMasquerade: false });
  t.same(
    c.routeGroups('n').map((g) => [g.group.name, g.primary]),
    [
      ['lan', 'r1'],
      ['v6', 'r2'],
    ],
    'an IPv6 prefix is a route group too',
  );
  t.throws(() => c.removeRouteGroup('n', 'nope'), { code: 'MESHP_NOT_FOUND' });
  const ag = agents(c);
  c.removeRouteGroup('n', 'lan');
  const d = sync(c, ag.get('a')!, 'a')!;
  t.same(groups(ag.get('a')!), [], 'removed: gone from its user');
  t.same(d.removePeers.map((p) => p.id).sort(), ['r1', 'r2'], 'with the via peers only the group put there');
});

t.test('the primary fails over to the next via node that is up, and a via node coming back does not take it back (no flap)', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  const ag = agents(c);
  const up = new Set(['r1', 'r2']);
  const isUp = (id: string) => up.has(id);
  const primary = () => c.routeGroups('n')[0]!.primary;
  const down = (id: string) => (up.delete(id), c.routeLiveness('n', id, false, isUp));
  const back = (id: string) => (up.add(id), c.routeLiveness('n', id, true, isUp));

  t.same(down('r1'), { lan: 'r2' }, 'r1 down: r2 takes the group');
  const d = sync(c, ag.get('a')!, 'a')!;
  t.same(d.routeGroups?.groups[0]?.viaPeers, ['r2', 'r1'], 'the delta to the user says r2 first');
  t.same(d.upsertPeers, [], 'no peer moves: both via nodes stay in the view, only the prefixes change hands');
  t.same(d.removePeers, []);
  t.equal(sync(c, ag.get('b')!, 'b'), null, 'b, not a user, is sent nothing');

  t.equal(back('r1'), null, 'r1 back: nothing moves while r2 is up');
  t.equal(primary(), 'r2');
  t.equal(c.deltaFor('n', 'a'), null, 'and nothing is sent');

  t.same(down('r2'), { lan: 'r1' }, 'r2 down: back to r1, the next that is up');
  t.equal(down('r1'), null, 'r1 down too, none up: the primary stays where it is');
  t.equal(primary(), 'r1');
  t.same(back('r2'), { lan: 'r2' }, 'r2 up while the primary is down: it takes the group');
  c.setRouteGroup('n', LAN);
  t.equal(primary(), 'r2', 'the group set again keeps the primary chosen');
  t.equal(c.routeLiveness('n', 'a', false, isUp), null, 'a node that serves no group moves nothing');
  for (const id of ['a', 'r1', 'r2']) sync(c, ag.get(id)!, id);
  for (const [id, a] of ag) t.ok(sameAsSnapshot(c, a, id), `${id}'s view is its snapshot`);
});

t.test('a via node renamed: its groups and the primary chosen follow its new name, and its users keep the route in one delta', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  const ag = agents(c);
  // r1 down, r2 up: r2 is chosen primary and stored so.
  c.routeLiveness('n', 'r1', false, (id) => id === 'r2');
  sync(c, ag.get('a')!, 'a');
  t.same(groups(ag.get('a')!)[0]?.viaPeers, ['r2', 'r1']);
  c.renameNode('n', 'r2', 'r9');
  t.same(
    c.routeGroups('n').map((g) => [g.group.viaPeers, g.primary, g.missingVia]),
    [[['r1', 'r9'], 'r9', []]],
    'the group names r9, its primary still; no via node is missing',
  );
  const d = sync(c, ag.get('a')!, 'a')!;
  t.not(d.fromVersion, 0, 'one delta, not a snapshot');
  t.same(groups(ag.get('a')!)[0]?.viaPeers, ['r9', 'r1'], 'a sends the prefixes to r9');
  t.ok(ag.get('a')!.view.peer('r9'), 'r9 in its view');
  t.notOk(ag.get('a')!.view.peer('r2'), 'r2 gone from it');
  t.ok(sameAsSnapshot(c, ag.get('a')!, 'a'));
  c.renameNode('n', 'a', 'a2');
  t.same(c.routeGroups('n')[0]?.group.viaPeers, ['r1', 'r9'], 'a user renamed: the group is unchanged');
});

t.test('a failover or a group change concerns only the via nodes and users of the groups it changes: the other streams are not pumped', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  c.setRouteGroup('n', { name: 'dmz', prefixes: ['10.9.0.0/24'], viaPeers: ['b'], noMasquerade: false });
  const ag = agents(c);
  const before = c.stateVersion('n');
  c.routeLiveness('n', 'r1', false, (id) => id === 'r2');
  t.not(c.stateVersion('n'), before, 'the failover is a change');
  t.same([...(c.affectedSince('n', before) ?? ['everyone'])].sort(), ['a', 'r1', 'r2'], "lan's users and via nodes, not b nor the control-node");
  for (const id of ['a', 'r1', 'r2']) sync(c, ag.get(id)!, id);
  t.equal(c.deltaFor('n', 'b'), null, 'b, whose view did not change, is sent nothing');
  const mid = c.stateVersion('n');
  c.setRouteGroup('n', { name: 'dmz', prefixes: ['10.9.0.0/24', '10.9.1.0/24'], viaPeers: ['b'], noMasquerade: false });
  t.same([...(c.affectedSince('n', mid) ?? ['everyone'])].sort(), ['b'], 'dmz changed: its via node only (no rule lets anyone use it)');
  for (const [id, a] of ag) {
    sync(c, a, id);
    t.ok(sameAsSnapshot(c, a, id), `${id}'s view is its snapshot`);
  }
});

t.test('masquerade turned off for a group reaches its via nodes and users in a delta, each view what a snapshot gives (issue 26, ADR 0038)', async (t) => {
  const c = setup();
  c.setRouteGroup('n', LAN);
  const ag = agents(c);
  c.setRouteGroup('n', { ...LAN, noMasquerade: true });
  for (const id of ['r1', 'r2', 'a']) {
    t.ok(sync(c, ag.get(id)!, id)?.routeGroups, `${id} is sent the group again`);
    t.equal(groups(ag.get(id)!)[0]?.noMasquerade, true, `${id}'s view says no masquerade`);
    t.ok(sameAsSnapshot(c, ag.get(id)!, id), `${id}'s view is a snapshot's`);
  }
  t.equal(sync(c, ag.get('b')!, 'b'), null, 'b is told nothing');
});

t.test(
  'an exit node (ADR 0039) is used only by a node that opts in and whose policy allows it: the admin setting wins over the agent, --off and clear',
  async (t) => {
    const c = setup();
    c.setPolicy('n', [
      { from: 'user', to: 'route:lan', ports: ['80/tcp'] },
      { from: 'user', to: 'route:out' },
    ]);
    c.setRouteGroup('n', LAN);
    // An exit node's default routes overlap the LAN and each other by nature: not refused.
    c.setRouteGroup('n', { name: 'out', prefixes: ['0.0.0.0/0', '::/0'], viaPeers: ['r2'], noMasquerade: false });
    c.setRouteGroup('n', { name: 'out2', prefixes: ['0.0.0.0/0'], viaPeers: ['r1'], noMasquerade: false });
    const ag = agents(c);
    const names = (id: string) => groups(ag.get(id)!).map((g) => g.name);
    t.same(names('a'), ['lan'], 'a may use out, has not opted in: not sent it');
    t.same(c.exitNodeOf('n', 'a'), { exitNode: '', reason: '', primary: '' });
    t.same(c.routeGroups('n').find((g) => g.group.name === 'out')?.users, [], 'nobody uses it yet');

    const preview = c.setExitNode('n', 'a', { group: 'out' }, true);
    t.same(preview.changedNodes, ['a', 'r2'], 'the preview names a and the exit node');
    t.equal(preview.exitNode, 'out');
    t.same(names('a'), ['lan'], 'the preview changed nothing');
    t.same(c.exitNodeOf('n', 'a').exitNode, '', 'nothing stored by the preview');
    c.setExitNode('n', 'a', { group: 'out' });
    for (const id of ['a', 'b', 'r1', 'r2']) sync(c, ag.get(id)!, id);
    t.same(names('a'), ['lan', 'out'], 'opted in: a is sent the exit node');
    t.same(groups(ag.get('a')!).find((g) => g.name === 'out')?.viaPeers, ['r2']);
    t.ok(peers(ag.get('r2')!).includes('a'), 'the exit node has its user');
    t.same(c.exitNodeOf('n', 'a'), { exitNode: 'out', reason: 'admin', primary: 'r2' });
    for (const [id, x] of ag) t.ok(sameAsSnapshot(c, x, id), `${id}'s view is its snapshot`);

    // b asks by its agent (Hello): not allowed by the policy, it gets nothing, said why.
    c.exitAsked('n', 'b', 'out');
    sync(c, ag.get('b')!, 'b');
    t.same(names('b'), [], 'b is not allowed: no exit node');
    t.same(c.exitNodeOf('n', 'b'), { exitNode: '', reason: 'not allowed', primary: '' });

    // The agent asks for another; the admin's setting wins; --off wins too; clear: the agent's holds.
    c.exitAsked('n', 'a', 'out2');
    t.equal(c.exitNodeOf('n', 'a').exitNode, 'out', "the admin's setting wins over the agent's ask");
    c.setExitNode('n', 'a', { off: true });
    for (const id of ['a', 'r1', 'r2']) sync(c, ag.get(id)!, id);
    t.same(names('a'), ['lan'], 'off: no exit node, whatever the agent asks');
    t.same(c.exitNodeOf('n', 'a').reason, 'off');
    t.ok(sameAsSnapshot(c, ag.get('r2')!, 'r2'), "the exit node's view is its snapshot (a stays its peer as a user of lan)");
    c.setExitNode('n', 'a', {});
    sync(c, ag.get('a')!, 'a');
    t.equal(c.exitNodeOf('n', 'a').reason, 'not allowed', "cleared: the agent's out2 holds, which the policy does not allow");
    t.same(names('a'), ['lan']);
    for (const [id, x] of ag) if (sync(c, x, id) !== undefined) t.ok(sameAsSnapshot(c, x, id), `${id}'s view is its snapshot`);

    // Refusals: a group that is not an exit node, a via node using itself, both a name and --off.
    t.throws(() => c.setExitNode('n', 'a', { group: 'lan' }), { code: 'MESHP_ROUTE_INVALID', message: /not an exit node/ });
    t.throws(() => c.setExitNode('n', 'r2', { group: 'out' }), { code: 'MESHP_ROUTE_INVALID', message: /does not use itself/ });
    t.throws(() => c.setExitNode('n', 'a', { group: 'out', off: true }), { code: 'MESHP_ROUTE_INVALID' });
    t.throws(() => c.setExitNode('n', 'a', { group: 'nope' }), { code: 'MESHP_NOT_FOUND' });
    t.throws(() => c.setRouteGroup('n', { name: 'mixed', prefixes: ['0.0.0.0/0', '10.9.0.0/16'], viaPeers: ['r1'], noMasquerade: false }), {
      code: 'MESHP_ROUTE_INVALID',
    });
  },
);

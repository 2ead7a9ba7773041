/**
 * The mesh's own rule (issue 16): every member has the control-node (tag `control-node`, given by
 * genesis) in its view whatever the policy, and the control-node has every member, inbound only
 * unless a rule lets it reach one. A policy change never UNSCOPEs the control-node from a member; a
 * change of the control-node concerns every member, a change of any member concerns the control-node.
 * On a member nothing more is opened: its filter component is the policy's, and its tunnel filter
 * keeps the control-node out of the foundation rule. On the control-node, members reach the
 * foundation ports and nothing else the policy does not allow.
 */
import t from 'tap';
import type { StateDelta } from '@meshp/core';
import { CONTROL_NODE_TAG, DeltaApplier, PolicyIndex, REMOVAL_REASON, filterFor } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { TunnelFilter, foundationPorts } from '@meshp/tunnel-wireguard';
import { syncNode } from '../helpers/controller-sync.js';

const FOUNDATION = { ports: { store: 15432, control: 7443, tunnel: 51820 } };

/** m1 the control-node (genesis's settings); x(a), y(b), u untagged; no policy at all. */
function setup() {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n', { privateRange: '10.60.0.0/16' });
  c.join('n', { id: 'm1', nodeKey: 'k1', tags: [CONTROL_NODE_TAG], settings: FOUNDATION });
  c.join('n', { id: 'x', nodeKey: 'kx', tags: ['a'] });
  c.join('n', { id: 'y', nodeKey: 'ky', tags: ['b'] });
  c.join('n', { id: 'u', nodeKey: 'ku' });
  return c;
}

const sync = (c: Controller, agent: DeltaApplier, node: string): StateDelta | null => syncNode(c, agent, node)?.delta ?? null;

const view = (a: DeltaApplier) => Object.fromEntries([...a.view.peers].map(([id, e]) => [id, e.peer.inboundOnly ? 'inbound' : 'reach']));

t.test('the tag is the one genesis gives', async (t) => {
  t.equal(CONTROL_NODE_TAG, 'control-node');
});

t.test('under an empty policy every member holds the control-node, and only it; the control-node holds every member, inbound only', async (t) => {
  const c = setup();
  const agents = Object.fromEntries(['m1', 'x', 'y', 'u'].map((id) => [id, new DeltaApplier()]));
  for (const [id, a] of Object.entries(agents)) sync(c, a, id);
  for (const id of ['x', 'y', 'u']) t.same(view(agents[id]!), { m1: 'reach' }, `${id} may reach m1 and sees no other member`);
  t.same(view(agents['m1']!), { u: 'inbound', x: 'inbound', y: 'inbound' }, 'm1 holds every member, tagged or not, and opens no connection to them');
});

t.test('a policy change never unscopes the control-node from a member', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  const m1 = new DeltaApplier();
  sync(c, x, 'x');
  sync(c, m1, 'm1');
  const steps: { rules: { from: string; to: string }[]; m1SeesX: string }[] = [
    { rules: [{ from: 'a', to: CONTROL_NODE_TAG }], m1SeesX: 'inbound' },
    { rules: [{ from: 'a', to: 'b' }], m1SeesX: 'inbound' },
    { rules: [{ from: CONTROL_NODE_TAG, to: 'a' }], m1SeesX: 'reach' },
    { rules: [], m1SeesX: 'inbound' },
  ];
  for (const s of steps) {
    c.setPolicy('n', s.rules);
    const d = sync(c, x, 'x');
    t.notOk(
      d?.removePeers.some((r) => r.id === 'm1'),
      `${JSON.stringify(s.rules)}: m1 is not removed from x's view`,
    );
    t.equal(view(x)['m1'], 'reach', 'x may still reach m1');
    t.equal(x.view.hash(), c.snapshotOf('n', 'x').hash, "x's view built by deltas is the snapshot");
    const dm = sync(c, m1, 'm1');
    t.notOk(
      dm?.removePeers.some((r) => r.id === 'x'),
      "x is not removed from m1's view",
    );
    t.equal(view(m1)['x'], s.m1SeesX, `m1 sees x ${s.m1SeesX === 'reach' ? 'reachable: a rule lets it' : 'inbound only'}`);
    t.equal(m1.view.hash(), c.snapshotOf('n', 'm1').hash);
  }
  c.leave('n', 'm1');
  t.same(sync(c, x, 'x')?.removePeers, [{ id: 'm1', reason: REMOVAL_REASON.REMOVED }], 'only its removal takes it away: REMOVED');
});

t.test("the tag taken from the control-node unscopes it (an operator's act, not a policy change); given to a member, every node sees it", async (t) => {
  const c = setup();
  const agents = Object.fromEntries(['m1', 'x', 'y', 'u'].map((id) => [id, new DeltaApplier()]));
  for (const [id, a] of Object.entries(agents)) sync(c, a, id);
  c.setTags('n', 'y', ['b', CONTROL_NODE_TAG]);
  for (const [id, a] of Object.entries(agents)) {
    sync(c, a, id);
    t.equal(a.view.hash(), c.snapshotOf('n', id).hash, `${id}: the delta gives the snapshot`);
  }
  t.same(view(agents['y']!), { m1: 'reach', u: 'inbound', x: 'inbound' }, 'the new control-node holds every member');
  t.same(view(agents['x']!), { m1: 'reach', y: 'reach' });
  c.setTags('n', 'm1', []);
  const d = sync(c, agents['x']!, 'x')!;
  t.same(d.removePeers, [{ id: 'm1', reason: REMOVAL_REASON.UNSCOPED }], 'x no longer holds m1: unscoped, not removed');
  const dm = sync(c, agents['m1']!, 'm1')!;
  t.ok(dm.fromVersion > 0, 'a delta, not a snapshot');
  t.same(dm.removePeers.map((r) => r.id).sort(), ['u', 'x'], "m1's view shrinks to the control-node y");
  t.same(view(agents['m1']!), { y: 'reach' });
});

t.test("the fan-out: a member's change concerns the control-node, a change of the control-node concerns everyone", async (t) => {
  const c = setup();
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  let v = c.stateVersion('n');
  c.rotateKey('n', 'u', 'ku2');
  t.same([...(c.affectedSince('n', v) ?? [])].sort(), ['m1', 'u'], "u's key: u and the control-node (no rule names u)");
  v = c.stateVersion('n');
  c.rotateKey('n', 'x', 'kx2');
  t.same([...(c.affectedSince('n', v) ?? [])].sort(), ['m1', 'x', 'y'], "x's key: x, y (the rule), the control-node");
  v = c.stateVersion('n');
  c.updateMember('n', 'm1', { endpoints: ['192.0.2.1:51820'] });
  t.equal(c.affectedSince('n', v), null, "the control-node's endpoint: every member");
});

t.test("a member's filter is the policy's: the control-node in its view adds no rule, nor a port", async (t) => {
  const c = setup();
  const member = c.member('n', 'x')!;
  t.same(filterFor(member, new PolicyIndex([])), { rules: [] }, 'empty policy: no rule on x');
  t.same(c.snapshotOf('n', 'x').delta.filter, { rules: [] }, 'and none sent');
  t.same(
    filterFor(member, new PolicyIndex([{ from: 'b', to: 'a', ports: ['80/tcp'] }])).rules,
    [{ sourceTags: ['b'], destinationTags: ['a'], ports: ['80/tcp'] }],
    'only what names its tags',
  );

  const snap = c.snapshotOf('n', 'x').delta;
  const m1 = snap.upsertPeers.find((p) => p.id === 'm1')!;
  // A member given foundation ports (an operator's settings): the control-node still does not reach them.
  const f = new TunnelFilter('wg_x');
  const script = f.rebuild(snap.filter, snap.upsertPeers, [7443]);
  const m1Addr = m1.addresses[0]!;
  t.ok(script.includes(`add element inet meshp_wg_wg_x control4 { ${m1Addr} }`), 'm1 is in the set the foundation rule leaves out');
  t.ok(
    script.includes('add rule inet meshp_wg_wg_x from_peers ip saddr @mesh4 ip saddr != @control4 tcp dport { 7443 } accept comment "meshp:tunnel"'),
    'the foundation rule: mesh members that are not the control-node',
  );
  t.notOk(
    script.some((l) => /element .* r\d+4 /.test(l) && l.includes(m1Addr)),
    'in no rule set: nothing else lets it in',
  );
  t.notOk(
    script.some((l) => l.includes('inbound4') && l.includes(m1Addr)),
    'and x may open connections to it',
  );
  t.same(
    f.upsert({ ...m1, tags: [] }).filter((l) => l.includes('control4')),
    [`delete element inet meshp_wg_wg_x control4 { ${m1Addr} }`],
    'a peer that loses the tag leaves the set',
  );
});

t.test('on the control-node every member reaches the foundation ports, and only what the policy allows besides', async (t) => {
  const c = setup();
  c.setPolicy('n', [{ from: 'a', to: CONTROL_NODE_TAG, ports: ['9/tcp'] }]);
  const snap = c.snapshotOf('n', 'm1').delta;
  const ports = foundationPorts(snap);
  t.same(ports, [7443, 15432], "genesis's foundation ports, the tunnel's aside");
  const f = new TunnelFilter('wg_c');
  const script = f.rebuild(snap.filter, snap.upsertPeers, ports);
  const addr = (id: string) => snap.upsertPeers.find((p) => p.id === id)!.addresses[0]!;
  const mesh = script.find((l) => l.startsWith('add element inet meshp_wg_wg_c mesh4'))!;
  t.ok(
    ['x', 'y', 'u'].every((id) => mesh.includes(addr(id))),
    'every member is in `mesh`: the foundation ports are open to it',
  );
  t.notOk(
    script.some((l) => l.includes('element') && l.includes('control4')),
    'no control-node among its peers',
  );
  const r0 = script.filter((l) => l.startsWith('add element inet meshp_wg_wg_c r04'));
  t.same(r0, [`add element inet meshp_wg_wg_c r04 { ${addr('x')} }`], 'only x (a) meets the rule to port 9');
  const inbound = script.find((l) => l.startsWith('add element inet meshp_wg_wg_c inbound4'))!;
  t.ok(
    ['x', 'y', 'u'].every((id) => inbound.includes(addr(id))),
    'and the control-node opens no connection to any of them',
  );
});

/**
 * The controller's part of the tunnel: the key a node enrols with (or changes to) reaches every peer
 * that sees it, in `Peer.tunnel_key`; the tunnel's address carries the private range's prefix; a node
 * that unscoped a peer is still told when that peer is removed; the nftables driver counts the tunnel's
 * tables as the mesh's own.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMeshpError, type StateDelta, type ViewChange } from '@meshp/core';
import { DeltaApplier, REMOVAL_REASON, endpointsOf, mappingsOf, observedEndpoint } from '@meshp/core/delta';
import { Controller, MemoryStore, SqliteControllerStore, type ControllerStore } from '@meshp/controller';
import { classifyTable, parseRuleset } from '@meshp/firewall-nftables';
import { generatePrivateKey, publicKeyOf } from '@meshp/tunnel-wireguard';
import { dirname } from 'node:path';
import { assertPrivate } from '../helpers/modes.js';
import { syncNode } from '../helpers/controller-sync.js';

const KX = publicKeyOf(generatePrivateKey());
const KY = publicKeyOf(generatePrivateKey());
const KY2 = publicKeyOf(generatePrivateKey());

/** x(a) may reach y(b); z(c) sees nobody. x and y run tunnels. */
function setup(store: ControllerStore = new MemoryStore()) {
  const c = new Controller(store);
  c.createNetwork('n', { privateRange: '10.60.0.0/16' });
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  c.join('n', { id: 'x', nodeKey: 'kx', tags: ['a'], tunnelKey: KX });
  c.join('n', { id: 'y', nodeKey: 'ky', tags: ['b'], tunnelKey: KY });
  c.join('n', { id: 'z', nodeKey: 'kz', tags: ['c'] });
  return c;
}

/** What the agent's tunnel is handed, per node, in order. */
const seen = new Map<DeltaApplier, ViewChange[]>();

function sync(c: Controller, agent: DeltaApplier, node: string): StateDelta | null {
  const r = syncNode(c, agent, node);
  if (r) seen.set(agent, [...(seen.get(agent) ?? []), r.applied.change]);
  return r?.delta ?? null;
}

const code = (fn: () => unknown): string | undefined => {
  try {
    fn();
  } catch (e) {
    return isMeshpError(e) ? e.code : String(e);
  }
  return undefined;
};

t.test('the tunnel key given at enrolment is in the peer every other node is sent', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  const y = new DeltaApplier();
  sync(c, x, 'x');
  sync(c, y, 'y');
  t.equal(x.view.peer('y')?.tunnelKey, KY, "x's snapshot carries y's key");
  t.equal(y.view.peer('x')?.tunnelKey, KX, "y's too (x is inbound only there: keys for the tunnel's other end)");
  t.equal(x.view.hash(), c.snapshotOf('n', 'x').hash, 'the hash agrees with the key in it');
  t.equal(x.view.components.tunnel?.address, '10.60.0.1/16', "the tunnel's address routes the private range");
  c.setPolicy('n', [
    { from: 'a', to: 'b' },
    { from: 'a', to: 'c' },
  ]);
  const d = sync(c, x, 'x')!;
  t.same(
    d.upsertPeers.map((p) => [p.id, p.tunnelKey ?? '']),
    [['z', '']],
    'a peer enrolled without a tunnel carries no key',
  );
});

t.test('a key that is no WireGuard key, or that another node holds, is refused; the same key again changes nothing', async (t) => {
  const c = setup();
  t.equal(
    code(() => c.join('n', { id: 'w', nodeKey: 'kw', tunnelKey: KX })),
    'MESHP_KEY_IN_USE',
  );
  t.equal(
    code(() => c.join('n', { id: 'w', nodeKey: 'kw', tunnelKey: 'not-a-key' })),
    'MESHP_USAGE',
  );
  t.equal(
    code(() => c.setTunnelKey('n', 'z', KY)),
    'MESHP_KEY_IN_USE',
  );
  const v = c.stateVersion('n');
  t.equal(c.setTunnelKey('n', 'y', KY), v, 'no new version');
});

t.test('a key change reaches the peers that see the node as an upsert, and only them', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  const z = new DeltaApplier();
  sync(c, x, 'x');
  sync(c, z, 'z');
  c.setTunnelKey('n', 'y', KY2);
  const d = sync(c, x, 'x')!;
  t.same(
    d.upsertPeers.map((p) => [p.id, p.tunnelKey]),
    [['y', KY2]],
  );
  t.equal(x.view.hash(), c.snapshotOf('n', 'x').hash);
  t.equal(c.deltaFor('n', 'z'), null, 'z never sees y: nothing is sent to it');
  c.setTunnelKey('n', 'y', '');
  t.equal(sync(c, x, 'x')!.upsertPeers[0]?.tunnelKey, undefined, 'a withdrawn key: the peer has none');
});

t.test('a node that unscoped a peer is told REMOVED when the peer is removed; a node that never saw it is not', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  const z = new DeltaApplier();
  sync(c, x, 'x');
  sync(c, z, 'z');
  c.setPolicy('n', []);
  t.same(sync(c, x, 'x')!.removePeers, [{ id: 'y', reason: REMOVAL_REASON.UNSCOPED }]);
  c.leave('n', 'y');
  const d = sync(c, x, 'x')!;
  t.same(d.removePeers, [{ id: 'y', reason: REMOVAL_REASON.REMOVED }], 'the tunnel holding y in its grace period lets it go now');
  t.equal(x.view.hash(), c.snapshotOf('n', 'x').hash, 'a removal outside the view moves no hash');
  t.equal(c.deltaFor('n', 'z'), null, 'z never saw y: lazy fan-out sends it nothing');
});

t.test('the applier reports a REMOVED outside the view as removed, an UNSCOPED outside it not at all', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  c.setPolicy('n', []);
  sync(c, x, 'x');
  c.leave('n', 'y');
  sync(c, x, 'x');
  const changes = seen
    .get(x)!
    .slice(1)
    .map((ch) => ({ removed: ch.removed, unscoped: ch.unscoped }));
  t.same(changes, [
    { removed: [], unscoped: ['y'] },
    { removed: ['y'], unscoped: [] },
  ]);
});

t.test('a peer rescoped after its UNSCOPED is no longer counted as in grace', async (t) => {
  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  c.setPolicy('n', []);
  sync(c, x, 'x');
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  sync(c, x, 'x');
  c.setPolicy('n', [{ from: 'a', to: 'c' }]);
  t.same(sync(c, x, 'x')!.removePeers, [{ id: 'y', reason: REMOVAL_REASON.UNSCOPED }]);
  c.setPolicy('n', [{ from: 'a', to: 'b' }]);
  sync(c, x, 'x');
  c.leave('n', 'y');
  t.same(sync(c, x, 'x')!.removePeers, [{ id: 'y', reason: REMOVAL_REASON.REMOVED }], 'in view: the ordinary REMOVED, once');
});

t.test('the key is kept in controller.db across a restart; a member stored without one loads as keyless', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-tk-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'controller.db');
  let c = setup(new SqliteControllerStore(file));
  assertPrivate(t, dirname(file)); // issue 13: the state folder 0700, its database 0600
  c.close();
  c = new Controller(new SqliteControllerStore(file));
  t.equal(c.member('n', 'x')?.tunnelKey, KX);
  t.equal(c.member('n', 'z')?.tunnelKey, undefined);
  t.notOk('tunnelKey' in c.member('n', 'z')!, 'no empty field stored for a node without a tunnel');
  c.close();
});

t.test("the nftables driver counts the tunnel's tables as the mesh's own, never as a found firewall", async (t) => {
  const rs = parseRuleset(
    JSON.stringify({
      nftables: [
        { table: { family: 'inet', name: 'meshp_wg_meshp0', handle: 1 } },
        { chain: { family: 'inet', table: 'meshp_wg_meshp0', name: 'input', handle: 1, type: 'filter', hook: 'input', prio: -5, policy: 'accept' } },
        { rule: { family: 'inet', table: 'meshp_wg_meshp0', chain: 'input', handle: 2, comment: 'meshp:tunnel', expr: [{ drop: null }] } },
        { table: { family: 'ip', name: 'meshp_wg_x', handle: 2 } },
      ],
    }),
  );
  t.same(
    rs.tables.map((x) => classifyTable(x, rs)),
    ['tunnel', 'found'],
    'only the inet table of that name is the tunnel',
  );
});

t.test("endpoints: the told ones first, then the Sync stream's source address on the node's tunnel port", async (t) => {
  t.equal(observedEndpoint('ipv4:10.97.0.3:40122', 51820), '10.97.0.3:51820', "gRPC's ipv4 form");
  t.equal(observedEndpoint('10.97.0.3:40122', 51000), '10.97.0.3:51000', "the bare form, the node's own port");
  t.equal(observedEndpoint('ipv6:[2001:db8::7]:40122', 51820), '[2001:db8::7]:51820');
  t.equal(observedEndpoint('ipv6:[::ffff:10.97.0.3]:40122', 51820), '10.97.0.3:51820', 'a v4-mapped address read as v4');
  for (const p of ['ipv4:127.0.0.1:4000', 'ipv6:[::1]:4000', 'unix:/tmp/s', '']) t.equal(observedEndpoint(p, 51820), null, `nothing from ${JSON.stringify(p)}`);
  t.same(
    endpointsOf({ endpoints: ['192.0.2.1:51820'], observedEndpoint: '10.97.0.3:51820' }),
    ['192.0.2.1:51820', '10.97.0.3:51820'],
    'told first: the tunnel uses the first',
  );
  t.same(endpointsOf({ endpoints: ['10.97.0.3:51820'], observedEndpoint: '10.97.0.3:51820' }), ['10.97.0.3:51820'], 'an address told already is not repeated');
  t.same(endpointsOf({ endpoints: [] }), []);

  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  const before = x.view.peer('y')?.endpoints;
  c.updateMember('n', 'y', { observedEndpoint: '10.97.0.9:51820' });
  const d = sync(c, x, 'x');
  t.ok(d, 'the observed address is a change: x gets a delta');
  t.same(before, [], 'y was enrolled with no endpoint');
  t.same(x.view.peer('y')?.endpoints, ['10.97.0.9:51820'], "x's view of y now carries where the controller saw y");
});

t.test("issue 27: a control-node's device's endpoint of a peer is the peer's mapping, a candidate after the told ones", async (t) => {
  t.same(
    endpointsOf({ endpoints: ['192.0.2.1:51820'], mappedEndpoint: '198.51.100.7:40211', observedEndpoint: '198.51.100.7:51820' }),
    ['192.0.2.1:51820', '198.51.100.7:40211', '198.51.100.7:51820'],
    'told, mapped (the NAT port), observed (the NAT address on the tunnel port)',
  );
  t.same(endpointsOf({ endpoints: [], mappedEndpoint: '10.97.0.3:51820', observedEndpoint: '10.97.0.3:51820' }), ['10.97.0.3:51820'], 'no repeat');
  t.same(endpointsOf({ endpoints: ['10.97.0.3:51820'], mappedEndpoint: '10.97.0.3:51820' }), ['10.97.0.3:51820']);

  const yKey = publicKeyOf(generatePrivateKey());
  const at = '2026-06-01T12:00:00.000Z';
  const s = Date.parse(at) / 1000;
  const members = new Map([
    ['y', { tunnelKey: yKey }],
    ['z', { tunnelKey: yKey, mappedEndpoint: '198.51.100.9:4000' }],
  ]);
  const h = (peer: string, o: Partial<{ publicKey: string; latestHandshake: number; endpoint: string; path: string }>) => ({
    peer,
    publicKey: yKey,
    latestHandshake: s - 10,
    endpoint: '198.51.100.7:40211',
    path: 'direct',
    ...o,
  });
  t.same(
    mappingsOf(
      [
        h('y', {}),
        h('y', { path: 'relayed', endpoint: '127.0.0.1:9' }),
        h('y', { latestHandshake: s - 181 }),
        h('y', { latestHandshake: 0 }),
        h('y', { publicKey: publicKeyOf(generatePrivateKey()), endpoint: '203.0.113.1:1' }),
        h('z', { endpoint: '198.51.100.9:4000' }),
        h('nobody', {}),
      ],
      at,
      (id) => members.get(id),
    ),
    [{ peer: 'y', endpoint: '198.51.100.7:40211' }],
    'only a fresh, direct handshake under the enrolled key, with a mapping not stored yet',
  );

  const c = setup();
  const x = new DeltaApplier();
  sync(c, x, 'x');
  c.updateMember('n', 'y', { mappedEndpoint: '198.51.100.7:40211' });
  t.ok(sync(c, x, 'x'), 'a new mapping is a change: x gets a delta');
  t.same(x.view.peer('y')?.endpoints, ['198.51.100.7:40211'], "x's view of y carries y's mapping");
});

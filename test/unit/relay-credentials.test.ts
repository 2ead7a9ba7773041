/**
 * Issue 27 (ADR 0040), the controller's side of relays: `setRelay` is previewed with the nodes it
 * changes and refused with a coded error when not valid (nothing stored); each tunnel member is sent
 * its own TURN REST API credential (username `EXPIRY:NODE`, base64 HMAC-SHA1 under the secret: what
 * coturn's use-auth-secret checks), never the secret; the credentials are renewed in a delta once
 * half their lifetime is gone; a node's relayed address is its peers' last candidate (`relay:`),
 * only in the views the policy gives it; an older agent's hash leaves the new fields out.
 */
import t from 'tap';
import { createHmac } from 'node:crypto';
import type { StateDelta } from '@meshp/core';
import { DeltaApplier, RELAY_CREDENTIAL_S, endpointsOf, relaysForRevision } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { StateDelta as WireDelta } from '@meshp/protocol';
import { peerConfig } from '@meshp/tunnel-wireguard';

const SECRET = 'lab-secret-0123456789';
const KEY = (n: number) => Buffer.alloc(32, n).toString('base64');
const RELAY = { id: 'eu1', address: '203.0.113.5', port: 3478, transport: 'udp', region: 'eu', secretName: 'coturn' };
const T0 = 1_900_000_000;

function setup() {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  c.join('n', { id: 'a', nodeKey: 'ka', tags: ['site'], tunnelKey: KEY(1) });
  c.join('n', { id: 'b', nodeKey: 'kb', tags: ['site'], tunnelKey: KEY(2) });
  c.join('n', { id: 'x', nodeKey: 'kx', tags: ['lone'], tunnelKey: KEY(3) });
  c.join('n', { id: 'plain', nodeKey: 'kp', tags: ['site'] });
  c.setPolicy('n', [{ from: 'site', to: 'site' }]);
  return c;
}

function sync(c: Controller, agent: DeltaApplier, node: string): StateDelta | null {
  const d = c.deltaFor('n', node);
  if (!d) return null;
  const r = agent.receive(WireDelta.decode(WireDelta.encode(d as never).finish()) as unknown as StateDelta);
  if (r.status !== 'applied') throw new Error(`not applied: ${JSON.stringify(r)}`);
  const ack = c.ack('n', node, r.ack.appliedVersion, r.ack.stateHash);
  if (!ack.accepted || ack.snapshotPending) throw new Error(`ack of ${node} not accepted: the view's hash is not the controller's`);
  return d;
}

t.test('relay set is previewed, then each tunnel member gets its own credential, never the secret', async (t) => {
  const c = setup();
  const a = new DeltaApplier();
  sync(c, a, 'a');
  const v0 = c.relays('n').length;
  const preview = c.setRelay('n', RELAY, SECRET, true, T0);
  t.same(preview.changedNodes, ['a', 'b', 'x'], 'the preview names every tunnel member (plain runs no tunnel)');
  t.equal(c.relays('n').length, v0, 'the preview stored nothing');
  const done = c.setRelay('n', RELAY, SECRET, false, T0);
  t.same(done.changedNodes, ['a', 'b', 'x']);
  t.same(c.relays('n'), [{ relay: RELAY, secretHeld: true }], 'listed with its secret held; the secret is not answered');
  const d = sync(c, a, 'a')!;
  const sent = d.relays!.relays;
  t.equal(sent.length, 1);
  const r = sent[0]!;
  t.equal(r.username, `${T0 + RELAY_CREDENTIAL_S}:a`, 'username EXPIRY:NODE');
  t.equal(r.expires, T0 + RELAY_CREDENTIAL_S, `valid ${RELAY_CREDENTIAL_S} s`);
  t.equal(r.password, createHmac('sha1', SECRET).update(r.username).digest('base64'), "the password is coturn's use-auth-secret HMAC of the username");
  t.notMatch(JSON.stringify(d), new RegExp(SECRET), 'the secret is nowhere in the delta');
  t.same({ address: r.address, port: r.port, transport: r.transport }, { address: RELAY.address, port: 3478, transport: 'udp' });

  const plain = new DeltaApplier();
  sync(c, plain, 'plain');
  t.same(plain.view.components.relays?.relays ?? [], [], 'a member with no tunnel gets no credential');
});

t.test('credentials are renewed in a delta once half their lifetime is gone, with no new secret', async (t) => {
  const c = setup();
  c.setRelay('n', RELAY, SECRET, false, T0);
  const a = new DeltaApplier();
  sync(c, a, 'a');
  t.equal(c.renewRelayCredentials('n', T0 + RELAY_CREDENTIAL_S / 2 - 1), null, 'not yet due: nothing');
  t.equal(c.deltaFor('n', 'a'), null, 'nothing to send');
  const v = c.renewRelayCredentials('n', T0 + RELAY_CREDENTIAL_S / 2);
  t.type(v, 'number', 'due at half: one version');
  const d = sync(c, a, 'a')!;
  t.equal(d.relays?.relays[0]?.expires, T0 + RELAY_CREDENTIAL_S / 2 + RELAY_CREDENTIAL_S, 'the new credential runs a full lifetime from now');
  t.same(d.upsertPeers, [], 'only the relays component moves');
});

t.test('a relay not valid is refused with a coded error; nothing stored', async (t) => {
  const c = setup();
  const refuse = (relay: Partial<typeof RELAY>, secret: string, re: RegExp) =>
    t.throws(() => c.setRelay('n', { ...RELAY, ...relay }, secret, false, T0), { code: 'MESHP_RELAY_INVALID', message: re });
  refuse({ id: 'Bad Id' }, SECRET, /id/);
  refuse({ port: 0 }, SECRET, /port 0/);
  refuse({ transport: 'tls' }, SECRET, /udp or tcp/);
  refuse({ address: 'no spaces here' }, SECRET, /not an IP address or host name/);
  refuse({}, '', /holds no secret named coturn/);
  t.same(c.relays('n'), [], 'nothing stored');
  c.setRelay('n', RELAY, SECRET, false, T0);
  t.doesNotThrow(() => c.setRelay('n', { ...RELAY, port: 3479 }, '', false, T0), 'the secret held is kept when none is given');
  t.throws(() => c.removeRelay('n', 'nope', false), { code: 'MESHP_NOT_FOUND' });
  const gone = c.removeRelay('n', 'eu1', false);
  t.same(gone.changedNodes, ['a', 'b', 'x']);
  t.same(c.relays('n'), []);
});

t.test("a node's relayed address is its peers' last candidate, only where the policy shows it", async (t) => {
  const c = setup();
  c.setRelay('n', RELAY, SECRET, false, T0);
  const [a, b, x] = [new DeltaApplier(), new DeltaApplier(), new DeltaApplier()];
  sync(c, a, 'a');
  sync(c, b, 'b');
  sync(c, x, 'x');
  c.updateMember('n', 'a', { endpoints: ['198.51.100.1:51820'], relayedEndpoint: '203.0.113.5:49170' });
  sync(c, b, 'b');
  t.same(b.view.peer('a')?.endpoints, ['198.51.100.1:51820', 'relay:203.0.113.5:49170'], 'b is given a: direct first, relayed last');
  t.equal(sync(c, x, 'x'), null, 'x (whose policy does not see a) is sent nothing');
  t.equal(x.view.peer('a'), undefined);
  const conf = peerConfig(b.view.peer('a')!, 25)!;
  t.equal(conf.endpoint, '198.51.100.1:51820', 'the tunnel starts on the direct endpoint');
  t.equal(conf.relayed, '203.0.113.5:49170', 'and knows the relayed one');
  t.same(endpointsOf({ endpoints: [], relayedEndpoint: '203.0.113.5:1' }), ['relay:203.0.113.5:1']);
  c.updateMember('n', 'a', { relayedEndpoint: undefined });
  sync(c, b, 'b');
  t.same(b.view.peer('a')?.endpoints, ['198.51.100.1:51820'], 'an allocation gone withdraws the candidate');
});

t.test('an older agent hashes the relays without the fields it does not know', async (t) => {
  const r = { relays: [{ id: 'eu1', address: '203.0.113.5', port: 3478, region: '', transport: 'udp', username: 'u', password: 'p', expires: 5 }] };
  t.same(relaysForRevision(r, 3).relays[0], {
    id: 'eu1',
    address: '203.0.113.5',
    port: 3478,
    region: '',
    transport: '',
    username: '',
    password: '',
    expires: 0,
  });
  t.equal(relaysForRevision(r, 4), r);
});

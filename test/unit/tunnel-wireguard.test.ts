/**
 * The tunnel plugin's pure parts: keys, the UAPI text, peers as WireGuard peers, the filter's
 * nft lines, the policy's ports. The device and the traffic are in test/lab/tunnel-wireguard.
 */
import t from 'tap';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isMeshpError, type Peer } from '@meshp/core';
import {
  TunnelFilter,
  endpointOf,
  foundationPorts,
  withTunnelOpening,
  ensureTunnelKey,
  parseGet,
  parsePorts,
  peerConfig,
  publicKeyOf,
  settingsOf,
  uapiLines,
  keyToHex,
} from '@meshp/tunnel-wireguard';

const KEY_A = Buffer.from('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a', 'hex').toString('base64');
const PUB_A = Buffer.from('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a', 'hex').toString('base64');

const peer = (id: string, over: Partial<Peer> = {}): Peer => ({
  id,
  nodeKey: 'ed',
  addresses: ['10.99.0.2'],
  tags: ['app'],
  endpoints: ['192.0.2.2:51820'],
  inboundOnly: false,
  tunnelKey: PUB_A,
  ...over,
});

t.test('the public key is X25519 of the private key (RFC 7748 vector)', async (t) => {
  t.equal(publicKeyOf(KEY_A), PUB_A);
});

t.test('the private key is made once, kept 0600, and read back the same', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-twg-key-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const a = ensureTunnelKey(dir, 'wg0');
  const b = ensureTunnelKey(dir, 'wg0');
  t.equal(a.publicKey, b.publicKey);
  t.equal(publicKeyOf(a.privateKey), a.publicKey);
  t.equal(statSync(a.file).mode & 0o777, 0o600);
});

t.test('a peer without a tunnel key is not configured', async (t) => {
  t.equal(peerConfig(peer('a', { tunnelKey: undefined }), 25), null);
  t.equal(peerConfig(peer('a', { tunnelKey: 'not-a-key' }), 25), null);
});

t.test('a peer becomes a WireGuard peer: its addresses as host routes, its first usable endpoint', async (t) => {
  const c = peerConfig(peer('a', { addresses: ['10.99.0.2', 'fd00::2'], endpoints: ['somewhere', '192.0.2.2'] }), 25)!;
  t.same(c.allowedIps, ['10.99.0.2/32', 'fd00::2/128']);
  t.equal(c.endpoint, '192.0.2.2:51820', 'a bare address gets the default port');
  t.equal(endpointOf('[fd00::1]:1234'), '[fd00::1]:1234');
  t.equal(endpointOf('host.example:1'), undefined, 'names are not resolved');
});

t.test('one delta is one set=1: removals and upserts in UAPI form, keys in hex', async (t) => {
  const c = peerConfig(peer('a'), 25)!;
  const lines = uapiLines({ listenPort: 51821, peers: [{ remove: PUB_A }, { upsert: c }] });
  t.same(lines, [
    'listen_port=51821',
    `public_key=${keyToHex(PUB_A)}`,
    'remove=true',
    `public_key=${keyToHex(PUB_A)}`,
    'replace_allowed_ips=true',
    'allowed_ip=10.99.0.2/32',
    'endpoint=192.0.2.2:51820',
    'persistent_keepalive_interval=25',
  ]);
});

t.test('get=1 is read into peers with their last handshake', async (t) => {
  const s = parseGet([
    'private_key=' + keyToHex(KEY_A),
    'listen_port=51820',
    'public_key=' + keyToHex(PUB_A),
    'endpoint=192.0.2.2:51820',
    'last_handshake_time_sec=1700000000',
    'last_handshake_time_nsec=5',
    'allowed_ip=10.99.0.2/32',
    'persistent_keepalive_interval=25',
    'protocol_version=1',
  ]);
  t.equal(s.listenPort, 51820);
  t.equal(s.privateKey, KEY_A);
  t.same(s.peers, [
    { publicKey: PUB_A, endpoint: '192.0.2.2:51820', allowedIps: ['10.99.0.2/32'], lastHandshake: 1700000000, persistentKeepalive: 25, rxBytes: 0, txBytes: 0 },
  ]);
});

t.test('the policy ports: tcp and udp unless named, ranges, any; anything else refused', async (t) => {
  t.same(parsePorts(['7000']), [
    { protocol: 'tcp', range: '7000' },
    { protocol: 'udp', range: '7000' },
  ]);
  t.same(parsePorts(['8000-8100/tcp']), [{ protocol: 'tcp', range: '8000-8100' }]);
  t.same(parsePorts([]), [{ protocol: 'any' }]);
  t.same(parsePorts(['*']), [{ protocol: 'any' }]);
  for (const bad of ['http', '0', '70000', '9-3', '80/icmp']) {
    const err = (() => {
      try {
        parsePorts([bad]);
      } catch (e) {
        return e;
      }
      return null;
    })();
    t.ok(isMeshpError(err) && err.code === 'MESHP_DELTA_INVALID', `${bad} refused`);
  }
});

t.test("the filter: a peer's rules follow a new filter (tag sets worked out once per rebuild); a peer's prefix goes to the interval set", async (t) => {
  const f = new TunnelFilter('wg-z');
  const web = f.rebuild({ rules: [{ sourceTags: ['web'], destinationTags: ['app'], ports: ['7000/tcp'] }] }, [peer('a', { tags: ['web'] })]);
  t.ok(web.includes('add element inet meshp_wg_wg_z r04 { 10.99.0.2 }'), 'web meets rule 0');
  const db = f.rebuild({ rules: [{ sourceTags: ['db'], destinationTags: ['app'], ports: ['7000/tcp'] }] }, [peer('a', { tags: ['web'] })]);
  t.notOk(
    db.some((l) => l.startsWith('add element') && l.includes(' r04 ')),
    'the same tags under a rule for db: not in its set',
  );
  t.same(f.upsert(peer('b', { tags: ['db'], addresses: ['10.99.0.3'] })), [
    'add element inet meshp_wg_wg_z mesh4 { 10.99.0.3 }',
    'add element inet meshp_wg_wg_z r04 { 10.99.0.3 }',
  ]);
  const routed = f.rebuild(undefined, [peer('c', { addresses: ['10.99.0.4', '10.98.0.0/24', 'fd99::4'] })]);
  t.ok(routed.includes('add element inet meshp_wg_wg_z mesh4 { 10.99.0.4 }'));
  t.ok(routed.includes('add element inet meshp_wg_wg_z mesh4n { 10.98.0.0/24 }'));
  t.ok(routed.includes('add element inet meshp_wg_wg_z mesh6 { fd99::4 }'));
});

t.test('the filter: a peer whose tags meet a rule is in its set; inbound-only peers in `inbound`; every rule marked', async (t) => {
  const f = new TunnelFilter('wg-x');
  const script = f.rebuild({ rules: [{ sourceTags: ['web'], destinationTags: ['app'], ports: ['7000/tcp'] }] }, [
    peer('a', { tags: ['web'] }),
    peer('b', { tags: ['db'], addresses: ['10.99.0.3'], inboundOnly: true }),
  ]);
  t.equal(f.table, 'meshp_wg_wg_x');
  t.ok(script.includes('add rule inet meshp_wg_wg_x from_peers ip saddr @r04 tcp dport 7000 accept comment "meshp:tunnel"'));
  t.ok(script.includes('add element inet meshp_wg_wg_x r04 { 10.99.0.2 }'), 'a (web) may reach 7000');
  t.notOk(
    script.some((l) => l.includes('r04 { 10.99.0.3 }')),
    'b (db) may not',
  );
  t.ok(script.includes('add element inet meshp_wg_wg_x inbound4 { 10.99.0.3 }'));
  t.ok(script.filter((l) => l.startsWith('add rule')).every((l) => l.endsWith('comment "meshp:tunnel"')));
  t.same(
    f.upsert(peer('a', { tags: ['db'] })),
    ['delete element inet meshp_wg_wg_x r04 { 10.99.0.2 }'],
    'a tag change moves the peer out of the set, nothing else',
  );
  t.same(f.block('a', ['10.99.0.2']), ['add element inet meshp_wg_wg_x blocked4 { 10.99.0.2 }']);
  t.same(f.block('a', ['10.99.0.2']), [], 'blocked once');
  t.same(f.unblock('a'), ['delete element inet meshp_wg_wg_x blocked4 { 10.99.0.2 }']);
  t.notOk(
    f.rebuild(undefined, []).some((l) => l.includes('element') && l.includes('blocked4')),
    'a rebuild brings back no lifted block',
  );
  f.block('c', ['10.99.0.4']);
  t.ok(f.rebuild(undefined, []).includes('add element inet meshp_wg_wg_x blocked4 { 10.99.0.4 }'), 'a rebuild keeps a peer in its grace blocked');
  t.same(
    f.block('d', ['10.98.0.0/16', 'fd00::5']),
    ['add element inet meshp_wg_wg_x blocked6 { fd00::5 }', 'add element inet meshp_wg_wg_x blocked4n { 10.98.0.0/16 }'],
    'hosts in hash sets, prefixes in interval sets',
  );
});

t.test('the interface settings: the address takes the private range prefix; the port may be overridden', async (t) => {
  const s = settingsOf({ tunnel: { address: '10.99.0.2', listenPort: 51830, mtu: 1380, keepaliveSeconds: 0 } }, { privateRange: '10.99.0.0/24' });
  t.same(s, { address: '10.99.0.2/24', range: '10.99.0.0/24', listenPort: 51830, mtu: 1380, keepalive: 0 });
  t.equal(settingsOf({}, { listenPort: 1 }).listenPort, 1);
});

t.test('every peer in the view reaches the foundation ports (settings), whatever the policy; the tunnel port aside', async (t) => {
  const ports = foundationPorts({ declaration: { settings: { ports: { store: 15432, control: 7443, tunnel: 51820 } } } as never });
  t.same(ports, [7443, 15432], "the declaration's ports without the tunnel's own");
  const f = new TunnelFilter('wg_x');
  const script = f.rebuild({ rules: [] }, [peer('a', { addresses: ['10.99.0.2'] })], ports);
  t.ok(
    script.includes('add rule inet meshp_wg_wg_x from_peers ip saddr @mesh4 ip saddr != @control4 tcp dport { 7443, 15432 } accept comment "meshp:tunnel"'),
    'one rule: mesh members (a control-node aside) to the foundation ports',
  );
  t.ok(script.includes('add element inet meshp_wg_wg_x mesh4 { 10.99.0.2 }'), 'the peer is a mesh member');
  t.ok(script.indexOf('@blocked4 drop') < script.findIndex((l) => l.includes('@mesh4')), 'a blocked (unscoped) peer is dropped before');
  t.same(
    f.upsert(peer('b', { addresses: ['10.99.0.3'] })).filter((l) => l.includes('mesh4')),
    ['add element inet meshp_wg_wg_x mesh4 { 10.99.0.3 }'],
    'an upserted peer joins the set',
  );
  t.same(
    f.remove('b').filter((l) => l.includes('mesh4')),
    ['delete element inet meshp_wg_wg_x mesh4 { 10.99.0.3 }'],
    'a removed one leaves it',
  );
  t.notOk(
    new TunnelFilter('wg_y').rebuild(undefined, []).some((l) => l.includes('dport {')),
    'no foundation ports, no rule',
  );
});

t.test("the tunnel's UDP port is added to every plan's openings, once, only where a firewall plugin can open it", async (t) => {
  const plan = (kind: string | null, openings: { id: string }[] = []) => ({
    node: 'n',
    mode: 'converged' as const,
    actions: [],
    firewall: { openings: openings as never[], refusals: [], kind },
  });
  const p = withTunnelOpening(plan('nftables'), { ports: { tunnel: 51999 } });
  t.same(
    p.firewall.openings.map((o) => [o.id, o.port, o.protocol, o.path, o.from]),
    [['tunnel/incoming/udp/51999', 51999, 'udp', 'incoming', []]],
    "from anywhere, on the settings' port",
  );
  t.same(
    p.actions.map((a) => [a.key, a.op, a.module]),
    [['opening:tunnel/incoming/udp/51999', 'create', 'tunnel']],
    'reported like any opening',
  );
  t.equal(withTunnelOpening(plan('nftables'), { ports: {} }).firewall.openings[0]!.port, 51820, 'the default port');
  t.equal(withTunnelOpening(plan('nftables'), undefined, 40000).firewall.openings[0]!.port, 40000, 'the plugin option wins');
  const has = plan('nftables', [{ id: 'tunnel/incoming/udp/51820' }]);
  t.equal(withTunnelOpening(has, { ports: {} }), has, 'a node assigned the tunnel module has it once');
  for (const kind of [null, 'none'])
    t.same(withTunnelOpening(plan(kind), { ports: {} }).firewall.openings, [], `no firewall plugin (${kind}): nothing claimed open`);
});

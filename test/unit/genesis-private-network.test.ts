/**
 * How genesis makes the private network: the tunnel unless an interface is given; with the tunnel
 * the control port is the one door on the underlay (bootstrap), every other foundation port stays
 * private; the control-node's tunnel key and its agent's choice are kept in the agent's state folder.
 */
import t from 'tap';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CatalogueModule } from '@meshp/core/catalogue';
import { bootstrapCatalogue, prepareTunnel, privateNetworkOf, savedTunnel } from '../../bin/src/genesis/private-network.js';
import { readCatalogue } from '../../bin/src/genesis/genesis.js';
import { tunnelDecision, tunnelOf } from '../../bin/src/remote/tunnel.js';

const CATALOGUE = join(import.meta.dirname, '../../examples/catalogue');
const silent = { info() {}, warn() {}, error() {} };

t.test('the tunnel unless an interface is given; a bad interface name is refused', async (t) => {
  t.same(privateNetworkOf({}), { kind: 'tunnel', interface: 'meshp0' });
  t.same(privateNetworkOf({ tunnelInterface: 'wg7' }), { kind: 'tunnel', interface: 'wg7' });
  t.same(privateNetworkOf({ privateInterface: 'eth1', tunnelInterface: 'wg7' }), { kind: 'interface', interface: 'eth1' });
  t.throws(() => privateNetworkOf({ tunnelInterface: 'a-name-far-too-long' }), { code: 'MESHP_USAGE' });
});

t.test('with the tunnel the control port opens from anywhere; store, registry, bus, broker stay private', async (t) => {
  const catalogue = readCatalogue(CATALOGUE);
  const froms = (c: CatalogueModule[]) =>
    Object.fromEntries(c.filter((m) => m.foundation).map((m) => [m.name, (m.openings as { from: string[] }[]).map((o) => o.from)]));
  const tunnel = froms(bootstrapCatalogue(catalogue, { kind: 'tunnel', interface: 'meshp0' }));
  t.same(tunnel['control'], [[]], 'control: from anywhere (tokens and the signed challenge are the gate)');
  for (const m of ['store', 'registry', 'bus', 'broker']) t.same(tunnel[m], [['{{privateRange}}']], `${m}: from the private range only`);
  t.same(tunnel['tunnel'], [[]], "the tunnel's UDP port: from anywhere");
  t.same(
    froms(bootstrapCatalogue(catalogue, { kind: 'interface', interface: 'eth1' }))['control'],
    [['{{privateRange}}']],
    'a shared private interface: control stays private',
  );
});

t.test("genesis keeps the control-node's tunnel key and choice; its agent raises that tunnel without flags", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-gpn-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.equal(prepareTunnel(dir, { kind: 'interface', interface: 'eth1' }), undefined, 'no tunnel, no key');
  t.equal(savedTunnel(dir), null);
  t.same(tunnelDecision({ state: dir }), { tunnel: 'none', explicit: false }, 'an agent without --tunnel, a record or a tunnel network runs none');
  const pub = prepareTunnel(dir, { kind: 'tunnel', interface: 'wg7' })!;
  t.match(pub, /^[A-Za-z0-9+/]{43}=$/, 'a WireGuard public key');
  t.equal(statSync(join(dir, 'wireguard', 'wg7.key')).mode & 0o777, 0o600, 'the private key 0600 in the agent state');
  t.same(savedTunnel(dir), { tunnel: 'wireguard', interface: 'wg7', publicKey: pub }, 'the record holds the interface and its key');
  t.equal(statSync(join(dir, 'tunnel.json')).mode & 0o777, 0o600);
  const plugin = (await tunnelOf({ state: dir }, silent))!;
  t.equal(plugin.status().interface, 'wg7', "the agent's tunnel is genesis's");
  t.match(tunnelDecision({ state: dir, tunnel: 'wireguard' }), { tunnel: 'wireguard', interface: 'wg7' }, '--tunnel wireguard alone: the recorded interface');
  t.throws(
    () => tunnelDecision({ state: dir, tunnel: 'none' }),
    { code: 'MESHP_TUNNEL_MISMATCH' },
    '--tunnel none over the recorded tunnel: refused (it would be left up, unmanaged)',
  );
  t.throws(
    () => tunnelDecision({ state: dir, tunnelInterface: 'wg8' }),
    { code: 'MESHP_TUNNEL_MISMATCH', message: /wg8.*wg7.*--tunnel-move/ },
    'another interface: refused, naming both',
  );
});

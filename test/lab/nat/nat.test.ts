/**
 * Nodes behind NAT connect directly (issue 27), through real nftables NAT in router namespaces: s1
 * and s2 each behind an endpoint-independent NAT (`masquerade`, unasked traffic dropped), s3 behind a
 * symmetric one (`masquerade fully-random`). Only p0 (the public node, as a control-node is) and the
 * routers are on the public side.
 *
 * 1. Each site has p0 as its peer, p0 has them with no endpoint: their keepalives reach p0 and p0's
 *    device learns each one's NAT mapping of its WireGuard port (the router's public address).
 * 2. What p0's device says is read as its agent reports it (peerHandshakes) and turned into each
 *    site's mapping as the controller does from a control-node's report (mappingsOf, endpointsOf).
 * 3. Given each other's mapping, s1 and s2 handshake directly through both NATs (both initiate:
 *    the hole is punched; keepalives hold it): the endpoint in use is the peer's NAT mapping, TCP
 *    flows, and the path each device reports says direct via that mapping.
 * 4. s1 and s3 never handshake (a symmetric NAT's mapping towards p0 is not the one towards s1):
 *    s1's device reports s3 never handshaked: nothing says connected.
 */
import t from 'tap';
import { endpointsOf, mappingsOf } from '@meshp/core/delta';
import type { Peer } from '@meshp/core';
import { parseDump, peerHandshakes, peerConfig, type PeerConfig } from '@meshp/tunnel-wireguard';
import { labAvailable } from '../../helpers/netns.js';
import { until } from '../../helpers/budget.js';
import { WG_PORT, tunnelOf, type LabNode } from '../tunnel-wireguard/bed.js';
import { P0_IP, natBed } from './bed.js';

const rule = (from: string, to: string) => ({ sourceTags: [from], destinationTags: [to], ports: ['7000'] });
const peer = (of: LabNode, tags: string[], endpoints: string[]): Peer => ({
  id: of.name,
  nodeKey: `ed25519-${of.name}`,
  addresses: [of.mesh],
  tags,
  endpoints,
  inboundOnly: false,
  tunnelKey: of.publicKey,
});
/** The node's device as its agent reads it: each peer of its view with its handshake, endpoint and path. */
const reported = async (n: LabNode, peers: Peer[]) => {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'dump']);
  const configured = new Map(peers.map((p) => [p.id, peerConfig(p, 25) as PeerConfig]));
  return peerHandshakes(configured, parseDump(stdout));
};
const handshakeOf = async (n: LabNode, of: LabNode) => ((await n.wgPeers()).get(of.publicKey) ?? 0) > 0;
const endpointOn = async (n: LabNode, of: LabNode) => {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'endpoints']);
  return stdout
    .split('\n')
    .map((l) => l.split('\t'))
    .find(([k]) => k === of.publicKey)?.[1];
};

t.test('behind NAT', { skip: labAvailable() ? false : 'needs root for namespaces, nftables and wireguard-go (CI runs it as root)' }, async (t) => {
  const { p0, sites } = await natBed(t, ['endpoint-independent', 'endpoint-independent', 'symmetric']);
  const [s1, s2, s3] = sites.map((s) => s.node) as [LabNode, LabNode, LabNode];
  const [r1, r2, r3] = sites;
  for (const n of [p0, s1, s2, s3]) await n.start(60_000);
  const version = new Map<LabNode, number>();
  const send = (n: LabNode, upsertPeers: Peer[], rules: ReturnType<typeof rule>[]) => {
    const from = version.get(n) ?? 0;
    version.set(n, from + 1);
    return n.delta({ network: 'lab', fromVersion: from, toVersion: from + 1, upsertPeers, removePeers: [], tunnel: tunnelOf(n), filter: { rules } });
  };
  const p0Peers = [s1, s2, s3].map((s) => peer(s, ['site'], []));
  await send(p0, p0Peers, []);
  for (const s of [s1, s2, s3]) await send(s, [peer(p0, ['control-node'], [`${P0_IP}:${WG_PORT}`])], [rule('site', 'site')]);

  let mapped = new Map<string, string>();
  await t.test("p0's device learns each site's NAT mapping of its WireGuard port", async (t) => {
    await until('p0 handshaked with every site', async () => (await Promise.all([s1, s2, s3].map((s) => handshakeOf(p0, s)))).every(Boolean), 60, 500);
    const hs = await reported(p0, p0Peers);
    const members = new Map([s1, s2, s3].map((s) => [s.name, { tunnelKey: s.publicKey }]));
    mapped = new Map(mappingsOf(hs, new Date().toISOString(), (id) => members.get(id)).map((m) => [m.peer, m.endpoint]));
    t.equal(mapped.get('s1'), `${r1!.publicIp}:${WG_PORT}`, "s1's mapping: its router's public address (an endpoint-independent NAT keeps the port)");
    t.equal(mapped.get('s2'), `${r2!.publicIp}:${WG_PORT}`, "s2's mapping: its router's public address");
    t.match(mapped.get('s3'), new RegExp(`^${r3!.publicIp.replace(/\./g, '\\.')}:\\d+$`), `s3's mapping towards p0: ${mapped.get('s3')}`);
    for (const h of hs) t.match(h, { path: 'direct' }, `p0 → ${h.peer}: direct`);
  });
  if (mapped.size < 3) return;

  // Each site is given the others with the endpoints the controller computes from the mappings.
  const candidate = (s: LabNode) => peer(s, ['site'], endpointsOf({ endpoints: [], mappedEndpoint: mapped.get(s.name)! }));
  const views = new Map<LabNode, Peer[]>([
    [s1, [peer(p0, ['control-node'], [`${P0_IP}:${WG_PORT}`]), candidate(s2), candidate(s3)]],
    [s2, [peer(p0, ['control-node'], [`${P0_IP}:${WG_PORT}`]), candidate(s1), candidate(s3)]],
    [s3, [peer(p0, ['control-node'], [`${P0_IP}:${WG_PORT}`]), candidate(s1), candidate(s2)]],
  ]);
  for (const [n, peers] of views) await send(n, peers, [rule('site', 'site')]);

  await t.test('s1 and s2, each behind an endpoint-independent NAT, handshake directly: hole punched', async (t) => {
    await until('s1 and s2 handshake', () => handshakeOf(s1, s2), 60, 500);
    t.equal(await endpointOn(s1, s2), `${r2!.publicIp}:${WG_PORT}`, "s1 sends to s2's NAT mapping");
    t.equal(await endpointOn(s2, s1), `${r1!.publicIp}:${WG_PORT}`, "s2 sends to s1's NAT mapping");
    t.ok(await s1.reaches(s2), 'TCP flows s1 → s2:7000 over the tunnel');
    t.ok(await s2.reaches(s1), 'TCP flows s2 → s1:7000');
    const path = (await reported(s1, views.get(s1)!)).find((h) => h.peer === 's2');
    t.match(path, { path: 'direct', endpoint: `${r2!.publicIp}:${WG_PORT}` }, "s1's report: direct, via s2's mapping");
    t.ok(path!.latestHandshake > 0);
  });

  await t.test('s3 behind a symmetric NAT: no direct handshake with s1; nothing says connected', async (t) => {
    // Three of WireGuard's 5 s retries and more, both sides initiating all the while.
    await new Promise((r) => setTimeout(r, 25_000));
    t.notOk(await handshakeOf(s1, s3), 's1 and s3 never handshaked directly');
    const path = (await reported(s1, views.get(s1)!)).find((h) => h.peer === 's3');
    t.equal(path?.latestHandshake, 0, "s1's report says s3 never handshaked");
    t.ok(await handshakeOf(s3, p0), 's3 still reaches p0 (its NAT lets the replies of what it sent in)');
  });
});

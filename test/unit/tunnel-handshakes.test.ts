/**
 * What the tunnel plugin reports of its peers (issue 33 item 4): each configured peer's latest
 * handshake as the device answered, by node name; a configured peer the device does not hold yet
 * has never handshaked (0), and a device peer the view does not name is not the node's to report.
 * Issue 27: with each, the endpoint the device sends to and whether it is direct, relayed or a direct
 * candidate on trial (trying).
 */
import t from 'tap';
import type { PeerHandshake, ReportMessage } from '@meshp/core';
import { generatePrivateKey, parseDump, peerHandshakes, publicKeyOf, type PeerConfig } from '@meshp/tunnel-wireguard';
import { wire as pb } from '@meshp/transport-grpc';
import { agentFromWire, agentToWire } from '../../plugins/transport-grpc/src/codec.js';

const key = () => publicKeyOf(generatePrivateKey());

t.test("each configured peer's latest handshake from `wg show dump`, by name; 0 for one not on the device", async (t) => {
  const [a, b, c, stray] = [key(), key(), key(), key()];
  const own = generatePrivateKey();
  // `wg show IF dump`: the interface, then per peer: key, psk, endpoint, allowed ips, latest handshake, rx, tx, keepalive.
  const dump = [
    `${own}\t${publicKeyOf(own)}\t51820\toff`,
    `${a}\t(none)\t10.0.0.2:51820\t100.96.0.2/32\t1780000000\t1200\t900\t25`,
    `${b}\t(none)\t10.0.0.3:51820\t100.96.0.3/32\t0\t0\t300\t25`,
    `${stray}\t(none)\t(none)\t100.96.0.9/32\t1780000100\t0\t0\toff`,
  ].join('\n');
  const conf = (publicKey: string): PeerConfig => ({ publicKey, allowedIps: [], keepalive: 25 });
  const configured = new Map([
    ['m3', conf(b)],
    ['m2', conf(a)],
    ['m4', conf(c)],
  ]);
  t.same(peerHandshakes(configured, parseDump(dump)), [
    { peer: 'm2', publicKey: a, latestHandshake: 1780000000, endpoint: '10.0.0.2:51820', path: 'direct' },
    { peer: 'm3', publicKey: b, latestHandshake: 0, endpoint: '10.0.0.3:51820', path: 'direct' },
    { peer: 'm4', publicKey: c, latestHandshake: 0 },
  ]);
  t.same(
    peerHandshakes(configured, parseDump(dump), (e) => e === '10.0.0.3:51820').map((h) => h.path),
    ['direct', 'relayed', undefined],
    "an endpoint that is this node's relay proxy is relayed; no endpoint, no path",
  );
  t.same(
    peerHandshakes(
      configured,
      parseDump(dump),
      (e) => e === '10.0.0.3:51820',
      (id) => id === 'm2' || id === 'm3',
    ).map((h) => h.path),
    ['trying', 'relayed', undefined],
    'a direct candidate on trial is trying, not direct (the handshake came on the relay); one the device went back to the proxy for is relayed',
  );
  t.same(peerHandshakes(new Map(), parseDump(dump)), [], 'no peer configured: none');
});

t.test('issue 27: the endpoint and path cross the wire; an older agent (none) reads as absent, an unknown path word is dropped', async (t) => {
  const [a, b] = [key(), key()];
  const report = (peerHandshakes: PeerHandshake[]): ReportMessage => ({
    appliedVersion: 1,
    mode: 'adopted',
    firewallKind: 'none',
    firewallActive: false,
    resources: [],
    at: '2026-06-01T12:00:00.000Z',
    peerHandshakes,
  });
  const sent = report([
    { peer: 'm2', publicKey: a, latestHandshake: 1780000000, endpoint: '[2001:db8::1]:40000', path: 'relayed' },
    { peer: 'm3', publicKey: b, latestHandshake: 0 },
    { peer: 'm4', publicKey: key(), latestHandshake: 1780000000, endpoint: '10.0.0.4:51820', path: 'trying' },
  ]);
  const bytes = pb.SyncRequest.encode(agentToWire({ report: sent })).finish();
  const got = agentFromWire(pb.SyncRequest.decode(bytes)) as { report: ReportMessage };
  t.same(got.report.peerHandshakes, sent.peerHandshakes);
  const odd = pb.SyncRequest.decode(bytes);
  odd.report!.peerHandshakes[0]!.path = 'carrier-pigeon';
  t.same((agentFromWire(odd) as { report: ReportMessage }).report.peerHandshakes![0], {
    peer: 'm2',
    publicKey: a,
    latestHandshake: 1780000000,
    endpoint: '[2001:db8::1]:40000',
  });
});

/**
 * What the tunnel plugin reports of its peers (issue 33 item 4): each configured peer's latest
 * handshake as the device answered, by node name; a configured peer the device does not hold yet
 * has never handshaked (0), and a device peer the view does not name is not the node's to report.
 */
import t from 'tap';
import { generatePrivateKey, parseDump, peerHandshakes, publicKeyOf, type PeerConfig } from '@meshp/tunnel-wireguard';

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
    { peer: 'm2', publicKey: a, latestHandshake: 1780000000 },
    { peer: 'm3', publicKey: b, latestHandshake: 0 },
    { peer: 'm4', publicKey: c, latestHandshake: 0 },
  ]);
  t.same(peerHandshakes(new Map(), parseDump(dump)), [], 'no peer configured: none');
});

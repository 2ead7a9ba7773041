/**
 * Every candidate endpoint of a peer tried in turn (issue 27): a peer with several usable endpoints
 * moves to the next when no fresh handshake came within the try time, round and round; one whose
 * handshake is fresh is never moved (it keeps the endpoint that works, even one it roamed to); a
 * peer with one candidate, or in grace, is left alone; a view change keeps the chosen candidate.
 */
import t from 'tap';
import {
  EndpointTrials,
  HANDSHAKE_FRESH_S,
  generatePrivateKey,
  keepChosen,
  peerConfig,
  publicKeyOf,
  type DeviceState,
  type PeerConfig,
} from '@meshp/tunnel-wireguard';
import type { Peer } from '@meshp/core';

const key = publicKeyOf(generatePrivateKey());
const peer = (endpoints: string[]): Peer => ({ id: 'm2', nodeKey: 'k', addresses: ['10.99.0.2'], tags: [], endpoints, inboundOnly: false, tunnelKey: key });
const device = (endpoint: string | undefined, lastHandshake: number): DeviceState => ({
  listenPort: 51820,
  peers: [{ publicKey: key, allowedIps: [], lastHandshake, persistentKeepalive: 25, rxBytes: 0, txBytes: 0, ...(endpoint ? { endpoint } : {}) }],
});

t.test('candidates: every usable endpoint once, in order; the first configured', async (t) => {
  const c = peerConfig(peer(['192.0.2.1:51820', 'not an endpoint', '198.51.100.7:40211', '192.0.2.1']), 25)!;
  t.same(c.candidates, ['192.0.2.1:51820', '198.51.100.7:40211'], 'a bare address is the default port: a repeat');
  t.equal(c.endpoint, '192.0.2.1:51820');
  t.equal(peerConfig(peer(['192.0.2.1:51820']), 25)!.candidates, undefined, 'one endpoint: nothing to try in turn');
});

t.test('no fresh handshake: the next candidate after the try time, round and round; a fresh one stays', async (t) => {
  const trials = new EndpointTrials(15_000);
  let conf = peerConfig(peer(['192.0.2.1:51820', '198.51.100.7:40211', '203.0.113.9:51820']), 25)!;
  const configured = () => new Map<string, PeerConfig>([['m2', conf]]);
  const T = 1_780_000_000_000;
  t.same(trials.next(configured(), device(conf.endpoint, 0), T), [], 'first look: its time starts');
  t.same(trials.next(configured(), device(conf.endpoint, 0), T + 14_999), [], 'within the try time: stays');
  const step = (at: number, d = device(conf.endpoint, 0)) => {
    const m = trials.next(configured(), d, at);
    if (m[0]) conf = m[0][1];
    return m.map(([id, c]) => [id, c.endpoint]);
  };
  t.same(step(T + 15_000), [['m2', '198.51.100.7:40211']], 'then the second');
  t.same(step(T + 20_000), [], 'the second is given its own time');
  t.same(step(T + 30_000), [['m2', '203.0.113.9:51820']], 'then the third');
  t.same(step(T + 45_000), [['m2', '192.0.2.1:51820']], 'then the first again');

  // It handshakes (on the first): kept, for as long as the handshake is fresh.
  const hs = (T + 50_000) / 1000;
  t.same(step(T + 120_000, device(conf.endpoint, hs)), [], 'fresh: never moved');
  t.same(step(T + 50_000 + HANDSHAKE_FRESH_S * 1000, device(conf.endpoint, hs)), [], 'at REJECT_AFTER_TIME: still fresh');
  t.same(step(T + 51_000 + HANDSHAKE_FRESH_S * 1000, device(conf.endpoint, hs)), [], 'past it: its time starts again');
  t.same(step(T + 66_000 + HANDSHAKE_FRESH_S * 1000, device(conf.endpoint, hs)), [['m2', '198.51.100.7:40211']], 'and it moves on');

  // Roamed to an endpoint that is not a candidate (the peer reached us from elsewhere) and fresh: left alone.
  t.same(trials.next(configured(), device('100.64.9.9:1234', (T + 400_000) / 1000), T + 400_000), []);
});

t.test('one candidate, in grace, not on the device: as said', async (t) => {
  const trials = new EndpointTrials(10);
  const one = peerConfig(peer(['192.0.2.1:51820']), 25)!;
  const two = peerConfig(peer(['192.0.2.1:51820', '198.51.100.7:40211']), 25)!;
  for (const at of [0, 100]) t.same(trials.next(new Map([['m2', one]]), device(one.endpoint, 0), at), [], 'one candidate: never moved');
  for (const at of [0, 100])
    t.same(
      trials.next(new Map([['m2', two]]), device(two.endpoint, 0), at, () => true),
      [],
      'in grace: never moved',
    );
  trials.next(new Map([['m2', two]]), { listenPort: 0, peers: [] }, 1000);
  t.same(
    trials.next(new Map([['m2', two]]), { listenPort: 0, peers: [] }, 2000).map(([, c]) => c.endpoint),
    ['198.51.100.7:40211'],
    'not on the device yet: moved from the configured one',
  );
});

t.test('keepChosen: the candidate in use stays while the peer still has it', async (t) => {
  const c = peerConfig(peer(['192.0.2.1:51820', '198.51.100.7:40211']), 25)!;
  t.equal(keepChosen(c, '198.51.100.7:40211').endpoint, '198.51.100.7:40211');
  t.equal(keepChosen(c, '100.64.9.9:1234').endpoint, '192.0.2.1:51820', 'not a candidate: the first');
  t.equal(keepChosen(c, undefined).endpoint, '192.0.2.1:51820');
});

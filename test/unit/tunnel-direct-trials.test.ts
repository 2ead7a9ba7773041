/**
 * A relayed peer's direct candidates tried again, bounded (issue 27, ADR 0046): the first trial
 * firstMs after the peer is carried by the relay, the next after twice as long each time one fails,
 * up to capMs; a trial is judged after windowMs from the device alone: kept when the endpoint is not
 * the proxy's socket and rx grew since the trial's endpoint was set, else the relay again. A peer the
 * device roamed to a direct path by itself is direct; one not on the relay, or with no direct
 * candidate, is left alone.
 */
import t from 'tap';
import { DirectTrials, generatePrivateKey, publicKeyOf, type DeviceState, type DirectMove, type PeerConfig } from '@meshp/tunnel-wireguard';

const key = publicKeyOf(generatePrivateKey());
const LOCAL = '127.0.0.1:40001';
const MAPPED = '192.0.2.1:51820';
const TOLD = '198.51.100.7:51820';
const conf: PeerConfig = {
  publicKey: key,
  allowedIps: ['10.99.0.2/32'],
  endpoint: LOCAL,
  candidates: [MAPPED, TOLD, LOCAL],
  relayed: '203.0.113.5:49170',
  keepalive: 25,
};
const configured = new Map([['m2', conf]]);
const T = 1_780_000_000_000;
/** The peer on the device at nowMs (a handshake `age` s before it, WireGuard's every two minutes). */
const device = (endpoint: string, rxBytes: number, nowMs = T, age = 10): DeviceState => ({
  listenPort: 51820,
  peers: [{ publicKey: key, endpoint, allowedIps: [], lastHandshake: nowMs / 1000 - age, persistentKeepalive: 25, rxBytes, txBytes: 0 }],
});
const isProxy = (e: string) => e.startsWith('127.0.0.1:');
const onRelay = () => LOCAL;
const kinds = (m: DirectMove[]) => m.map((x) => `${x.kind} ${x.endpoint}`);

t.test('on the relay: a trial after firstMs; failed, the relay again and twice the wait, up to the cap', async (t) => {
  const d = new DirectTrials({ firstMs: 60_000, capMs: 240_000, windowMs: 5_000 });
  t.same(d.next(configured, device(LOCAL, 100, T), T, onRelay, isProxy), [], 'first look on the relay: its time starts');
  t.same(d.next(configured, device(LOCAL, 100, T + 59_999), T + 59_999, onRelay, isProxy), [], 'within firstMs: stays');
  t.same(kinds(d.next(configured, device(LOCAL, 100, T + 60_000), T + 60_000, onRelay, isProxy)), [`try ${MAPPED}`], 'the first direct candidate tried');
  t.ok(d.trying('m2'));
  t.same(d.next(configured, device(MAPPED, 100, T + 61_000), T + 61_000, onRelay, isProxy), [], 'not judged before its rx is read back');
  d.started('m2', 150, T + 60_000);
  t.same(d.next(configured, device(MAPPED, 150, T + 64_999), T + 64_999, onRelay, isProxy), [], 'within the window: not judged');
  // Nothing came back from the direct path (rx as it was): the relay again.
  t.same(kinds(d.next(configured, device(MAPPED, 150, T + 65_000), T + 65_000, onRelay, isProxy)), [`relay ${LOCAL}`], 'no packet from it: the relay again');
  t.notOk(d.trying('m2'));
  t.same(d.next(configured, device(LOCAL, 400, T + 65_000 + 119_999), T + 65_000 + 119_999, onRelay, isProxy), [], 'the next waits twice firstMs');
  t.same(
    kinds(d.next(configured, device(LOCAL, 400, T + 65_000 + 120_000), T + 65_000 + 120_000, onRelay, isProxy)),
    [`try ${TOLD}`],
    'then the next direct candidate',
  );
  d.started('m2', 400, T + 185_000);
  // The peer's packets still came through the relay: the device went back to the proxy by itself.
  t.same(
    kinds(d.next(configured, device(LOCAL, 900, T + 190_000), T + 190_000, onRelay, isProxy)),
    [`relay ${LOCAL}`],
    'rx through the relay is not a direct path',
  );
  t.same(
    kinds(d.next(configured, device(LOCAL, 900, T + 190_000 + 240_000), T + 190_000 + 240_000, onRelay, isProxy)),
    [`try ${MAPPED}`],
    'the wait is capped (240 s, not 480 s)',
  );
});

t.test('a trial with an authenticated packet from the direct path is kept', async (t) => {
  const d = new DirectTrials({ firstMs: 1_000, windowMs: 5_000 });
  d.next(configured, device(LOCAL, 100, T), T, onRelay, isProxy);
  t.same(kinds(d.next(configured, device(LOCAL, 100, T + 1_000), T + 1_000, onRelay, isProxy)), [`try ${MAPPED}`]);
  d.started('m2', 120, T + 1_000);
  t.same(
    kinds(d.next(configured, device(MAPPED, 300, T + 6_000), T + 6_000, onRelay, isProxy)),
    [`direct ${MAPPED}`],
    'rx grew and the endpoint is the direct one: kept',
  );
  t.notOk(d.trying('m2'));
});

t.test('roamed to a direct path by itself: direct; not on the relay, no direct candidate, stale: left alone', async (t) => {
  const d = new DirectTrials({ firstMs: 1_000 });
  t.same(
    kinds(d.next(configured, device('192.0.2.1:40000', 100, T), T, onRelay, isProxy)),
    ['direct 192.0.2.1:40000'],
    'the device roamed to the peer: direct',
  );
  t.same(
    d.next(configured, device(LOCAL, 100), T, () => undefined, isProxy),
    [],
    'not on the relay (the plugin did not put it there): nothing',
  );
  const only = new Map([['m2', { ...conf, candidates: [LOCAL] }]]);
  d.next(only, device(LOCAL, 100, T), T, onRelay, isProxy);
  t.same(d.next(only, device(LOCAL, 100, T + 10_000), T + 10_000, onRelay, isProxy), [], 'no direct candidate: nothing to try');
  d.next(configured, device(LOCAL, 100, T, 1_000), T, onRelay, isProxy);
  t.same(
    d.next(configured, device(LOCAL, 100, T + 10_000, 1_000), T + 10_000, onRelay, isProxy),
    [],
    'the relay not carrying it (no fresh handshake): the candidates’ own trials run',
  );
});

/** The agent's small parts: reconnect backoff, token claims, the challenge payload. */
import t from 'tap';
import { isMeshpError } from '@meshp/core';
import { Backoff, challengePayload, decodeToken, encodeToken, normaliseFingerprint } from '@meshp/core/agent';

t.test('reconnect delays grow, are capped, and are jittered between half and all of their ceiling', async (t) => {
  const low = new Backoff({ initialMs: 100, maxMs: 1_000, random: () => 0 });
  const high = new Backoff({ initialMs: 100, maxMs: 1_000, random: () => 1 });
  t.same(
    [1, 2, 3, 4, 5, 6].map(() => low.next()),
    [50, 100, 200, 400, 500, 500],
  );
  t.same(
    [1, 2, 3, 4, 5, 6].map(() => high.next()),
    [100, 200, 400, 800, 1000, 1000],
  );
  high.reset();
  t.equal(high.next(), 100, 'reset starts over');
  const spread = new Set(Array.from({ length: 50 }, () => new Backoff({ initialMs: 1000, maxMs: 1000 }).next()));
  t.ok(spread.size > 10, 'agents cut off together do not come back together');
});

t.test('a token carries the network, the mode and the fingerprint; anything else is MESHP_TOKEN_INVALID', async (t) => {
  const fp = 'ab'.repeat(32);
  const token = encodeToken({ network: 'lab', adopted: true, fingerprint: fp }, 'secret_secret');
  t.same(decodeToken(token), { claims: { network: 'lab', adopted: true, fingerprint: fp }, secret: 'secret_secret' });
  for (const bad of [
    '',
    'meshp1',
    'meshp2.e30.x',
    'meshp1.!!!.x',
    `meshp1.${Buffer.from('{"n":"x","a":true,"f":"zz"}').toString('base64url')}.s`,
    'meshp1.e30.',
  ]) {
    let err: unknown;
    try {
      decodeToken(bad);
    } catch (e) {
      err = e;
    }
    t.ok(isMeshpError(err, 'MESHP_TOKEN_INVALID'), `refused: ${JSON.stringify(bad)}`);
  }
  t.equal(normaliseFingerprint('AB:CD:EF'), 'abcdef');
});

t.test('the challenge payload binds the node name to the nonce', async (t) => {
  const n = new Uint8Array([1, 2]);
  t.not(Buffer.from(challengePayload('a', n)).toString('hex'), Buffer.from(challengePayload('b', n)).toString('hex'));
  t.not(Buffer.from(challengePayload('a', n)).toString('hex'), Buffer.from(challengePayload('a', new Uint8Array([1, 3]))).toString('hex'));
});

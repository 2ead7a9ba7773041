/**
 * Issue 31 (ADR 0044): what every agent's delta shares is built and encoded once, and the wire stays
 * byte for byte what the generated encoder writes; the state hash's text, written directly, is the
 * canonical JSON it replaced.
 */
import t from 'tap';
import fc from 'fast-check';
import { COMPONENT_NAMES, stateHashText, stateHashTextCanonical, type StateDelta, type ViewDigest } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { encodeDeltaResponse } from '@meshp/transport-grpc';
import { StateDelta as Wire, SyncResponse } from '@meshp/protocol';

const N = 'net';
const generated = (d: Wire): Buffer => Buffer.from(SyncResponse.encode({ delta: d }).finish());
const wireOf = (d: StateDelta): Wire => ({ ...d, stateHash: d.stateHash ?? '', versionSignature: d.versionSignature ?? new Uint8Array(0) }) as Wire;

t.test('a join: every agent is sent the same frozen peer, and the bytes are the generated encoder’s', async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork(N);
  c.setPolicy(N, [{ from: 'a', to: 'a' }]);
  const ids = ['n0', 'n1', 'n2', 'n3'];
  for (const [i, id] of ids.entries()) c.join(N, { id, nodeKey: `k${i}`, tags: ['a'], endpoints: [`10.0.0.${i + 1}:51820`] });
  const snaps = ids.map((id) => c.deltaFor(N, id)!);
  for (const s of snaps) t.same(encodeDeltaResponse(wireOf(s)), generated(wireOf(s)), 'a snapshot encodes the same');
  for (const [i, id] of ids.entries()) {
    const s = snaps[i]!;
    c.ack(N, id, s.toVersion, s.stateHash!);
  }
  c.join(N, { id: 'late', nodeKey: 'k-late', tags: ['a'], endpoints: ['10.0.0.9:51820'] });
  const deltas = ids.map((id) => c.deltaFor(N, id)!);
  const first = deltas[0]!.upsertPeers[0]!;
  t.ok(Object.isFrozen(first), 'the new peer is frozen');
  t.ok(
    deltas.every((d) => d.upsertPeers.length === 1 && d.upsertPeers[0] === first),
    'one image of the new peer for every agent',
  );
  t.equal(new Set(deltas.map((d) => d.stateHash)).size, ids.length, 'each agent its own hash');
  for (const d of deltas) t.same(encodeDeltaResponse(wireOf(d)), generated(wireOf(d)), 'a join delta encodes the same');
  t.throws(() => (first.tags as string[]).push('b'), 'a shared image cannot be changed in place');
});

t.test('every field of a StateDelta is written as the generated encoder writes it', async (t) => {
  // A field added to StateDelta that encodeDeltaResponse does not write fails here.
  t.same(Object.keys(Wire.fromPartial({})).sort(), [
    'declaration',
    'dns',
    'filter',
    'fromVersion',
    'network',
    'part',
    'relays',
    'removePeers',
    'routeGroups',
    'stateHash',
    'toVersion',
    'tunnel',
    'upsertPeers',
    'versionSignature',
  ]);
  const peer = { id: 'p', nodeKey: 'k', addresses: ['100.64.0.1'], tags: ['a'], endpoints: ['1.2.3.4:51820'], inboundOnly: true, tunnelKey: 'tk' };
  const full = Wire.fromPartial({
    fromVersion: 3,
    toVersion: 2 ** 40,
    upsertPeers: [peer, Object.freeze({ ...peer, id: 'q' })],
    removePeers: [{ id: 'r', reason: 2 }],
    dns: { domain: 'mesh', records: [] } as never,
    filter: { rules: [{ sourceTags: ['a'], destinationTags: ['b'], ports: ['443'] }] },
    routeGroups: { groups: [] } as never,
    relays: {} as never,
    tunnel: { address: '100.64.0.1' } as never,
    declaration: { node: 'p', convergePreviewId: '' } as never,
    network: N,
    part: { index: 1, count: 2 },
    stateHash: 'ab'.repeat(32),
    versionSignature: new Uint8Array([1, 2, 3]),
  });
  t.same(encodeDeltaResponse(full), generated(full));
  const empty = Wire.fromPartial({});
  t.same(encodeDeltaResponse(empty), generated(empty));
  t.same(SyncResponse.decode(encodeDeltaResponse(full)).delta, SyncResponse.decode(generated(full)).delta);
});

t.test('the state hash text is the canonical JSON of the digest', async () => {
  const component = fc.option(
    fc.oneof(
      fc.uint8Array({ minLength: 32, maxLength: 32 }).map((b) => Buffer.from(b).toString('hex')),
      fc.constant(''),
    ),
    { nil: null },
  );
  fc.assert(
    fc.property(fc.bigInt({ min: 0n, max: (1n << 256n) - 1n }), fc.nat(100_000), fc.array(component, { minLength: 6, maxLength: 6 }), (sum, count, cs) => {
      const d: ViewDigest = {
        peerSum: sum,
        peerCount: count,
        components: Object.fromEntries(COMPONENT_NAMES.map((n, i) => [n, cs[i]!])) as ViewDigest['components'],
      };
      return stateHashText(d) === stateHashTextCanonical(d);
    }),
    { numRuns: 2000 },
  );
});

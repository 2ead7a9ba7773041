import t, { type Test } from 'tap';
import { isMeshpError, type Peer, type StateDelta } from '@meshp/core';
import { DeltaApplier, REMOVAL_REASON, WIRE_MODE, splitDelta } from '@meshp/core/delta';
import { StateDelta as WireStateDelta } from '@meshp/protocol';

const peer = (id: string, extra: Partial<Peer> = {}): Peer => ({
  id,
  nodeKey: `key-${id}`,
  addresses: [`10.0.0.${id.length}`],
  tags: ['t'],
  endpoints: [],
  inboundOnly: false,
  ...extra,
});
const delta = (from: number, to: number, extra: Partial<StateDelta> = {}): StateDelta => ({
  fromVersion: from,
  toVersion: to,
  upsertPeers: [],
  removePeers: [],
  network: 'net',
  ...extra,
});

function atVersion3(): DeltaApplier {
  const a = new DeltaApplier();
  a.receive(delta(0, 3, { upsertPeers: [peer('a'), peer('b')], dns: { nameservers: ['1.1.1.1'], searchDomains: [], records: [], domain: '', splits: [] } }));
  return a;
}

function refused(t: Test, a: DeltaApplier, d: StateDelta, code: string): void {
  const before = { version: a.view.version, hash: a.view.hash(), size: a.view.size };
  const err = t.throws(() => a.receive(d)) as unknown;
  t.ok(isMeshpError(err), 'a coded error');
  t.equal((err as { code: string }).code, code);
  t.same({ version: a.view.version, hash: a.view.hash(), size: a.view.size }, before, 'nothing applied');
}

t.test('a delta is applied only when from_version equals the applied version', async (t) => {
  const a = atVersion3();
  refused(t, a, delta(4, 5, { upsertPeers: [peer('c')] }), 'MESHP_DELTA_GAP');
  refused(t, a, delta(2, 5, { upsertPeers: [peer('c')] }), 'MESHP_DELTA_GAP');
  const r = a.receive(delta(3, 4, { upsertPeers: [peer('c')] }));
  t.equal(r.status, 'applied');
  t.equal(a.appliedVersion, 4);
});

t.test('a delta with from_version above to_version is refused and nothing is applied', async (t) => {
  refused(t, atVersion3(), delta(5, 4, { upsertPeers: [peer('c')] }), 'MESHP_DELTA_INVALID');
  refused(t, atVersion3(), delta(3, 3, { upsertPeers: [peer('c')] }), 'MESHP_DELTA_INVALID');
});

t.test('an unknown removal reason is refused and nothing is applied half', async (t) => {
  const a = atVersion3();
  refused(
    t,
    a,
    delta(3, 4, {
      upsertPeers: [peer('c')],
      removePeers: [
        { id: 'a', reason: REMOVAL_REASON.REMOVED },
        { id: 'b', reason: 7 },
      ],
    }),
    'MESHP_DELTA_INVALID',
  );
  refused(t, a, delta(3, 4, { removePeers: [{ id: 'a', reason: REMOVAL_REASON.UNSPECIFIED }] }), 'MESHP_DELTA_INVALID');
  t.ok(a.view.peer('a'), 'a is still there');
  t.notOk(a.view.peer('c'), 'c was not added');
});

t.test('a declaration with an unknown mode is refused', async (t) => {
  refused(
    t,
    atVersion3(),
    delta(3, 4, { declaration: { apiVersion: 'meshp/v1', node: 'n', mode: 9, modules: [], convergePreviewId: '', untakes: [], releases: [] } }),
    'MESHP_DELTA_INVALID',
  );
});

t.test('an oversized delta is refused with a coded error', async (t) => {
  const a = new DeltaApplier({ limits: { maxEntries: 10 } });
  a.receive(delta(0, 1));
  const many = Array.from({ length: 11 }, (_, i) => peer(`p${i}`));
  refused(t, a, delta(1, 2, { upsertPeers: many }), 'MESHP_DELTA_INVALID');
  const b = new DeltaApplier({ limits: { maxPeers: 5 } });
  b.receive(delta(0, 1));
  refused(t, b, delta(1, 2, { upsertPeers: many.slice(0, 6) }), 'MESHP_DELTA_INVALID');
});

t.test('after a refusal the agent asks for a snapshot, and the snapshot heals it', async (t) => {
  const a = atVersion3();
  const err = (() => {
    try {
      a.receive(delta(5, 6));
    } catch (e) {
      return e;
    }
    return null;
  })();
  const req = a.resyncRequest(err);
  t.equal(req.appliedVersion, 3);
  t.equal(req.reason, 1, 'reason GAP');
  t.match(req.detail, /MESHP_DELTA_GAP/);
  const r = a.receive(delta(0, 6, { upsertPeers: [peer('z')] }));
  t.equal(r.status, 'applied');
  t.equal(a.appliedVersion, 6);
});

t.test('removals are applied before upserts of the same peer', async (t) => {
  const a = atVersion3();
  const r = a.receive(delta(3, 4, { removePeers: [{ id: 'a', reason: REMOVAL_REASON.REMOVED }], upsertPeers: [peer('a', { nodeKey: 'new' })] }));
  t.equal(a.view.peer('a')?.nodeKey, 'new');
  t.equal(r.status, 'applied');
});

t.test('UNSCOPED and REMOVED are reported apart to viewChanged consumers', async (t) => {
  const a = atVersion3();
  const r = a.receive(
    delta(3, 4, {
      removePeers: [
        { id: 'a', reason: REMOVAL_REASON.REMOVED },
        { id: 'b', reason: REMOVAL_REASON.UNSCOPED },
      ],
    }),
  );
  if (r.status !== 'applied') throw new Error('not applied');
  t.same(r.change.removed, ['a']);
  t.same(r.change.unscoped, ['b']);
});

t.test('a duplicate delta is stale, not an error, and is not acked', async (t) => {
  const a = atVersion3();
  const d = delta(3, 4, { upsertPeers: [peer('c')] });
  a.receive(d);
  t.same(a.receive(d), { status: 'stale' });
  t.same(a.receive(delta(0, 2, { upsertPeers: [] })), { status: 'stale' }, 'an older snapshot is stale too');
  t.equal(a.view.size, 3);
});

t.test('an empty component and an absent one are distinct on the wire and in the view', async (t) => {
  const a = atVersion3();
  const absent = WireStateDelta.decode(WireStateDelta.encode(WireStateDelta.fromPartial(delta(3, 4))).finish());
  t.equal(absent.dns, undefined);
  a.receive(absent);
  t.same(a.view.components.dns?.nameservers, ['1.1.1.1'], 'absent: unchanged');
  const empty = WireStateDelta.decode(
    WireStateDelta.encode(
      WireStateDelta.fromPartial(delta(4, 5, { dns: { nameservers: [], searchDomains: [], records: [], domain: '', splits: [] } })),
    ).finish(),
  );
  t.ok(empty.dns, 'present after decoding');
  const r = a.receive(empty);
  t.same(a.view.components.dns?.nameservers, [], 'empty: replaced');
  if (r.status === 'applied') t.same(r.change.components, ['dns']);
});

t.test('the state hash is order-independent and matches a full recomputation', async (t) => {
  const x = new DeltaApplier();
  const y = new DeltaApplier();
  x.receive(delta(0, 1, { upsertPeers: [peer('a'), peer('b'), peer('c')] }));
  y.receive(delta(0, 1, { upsertPeers: [peer('c'), peer('a'), peer('b')] }));
  t.equal(x.view.hash(), y.view.hash());
  x.receive(delta(1, 2, { removePeers: [{ id: 'b', reason: REMOVAL_REASON.UNSCOPED }] }));
  t.equal(x.view.hash(), x.view.recomputeHash());
  t.not(x.view.hash(), y.view.hash());
});

t.test('a snapshot replaces the view; peers it drops are reported removed', async (t) => {
  const a = atVersion3();
  const r = a.receive(delta(0, 9, { upsertPeers: [peer('b'), peer('c')] }));
  if (r.status !== 'applied') throw new Error('not applied');
  t.same(r.change.removed, ['a']);
  t.same(r.change.upserted, ['c']);
  t.equal(a.view.components.dns, undefined, 'components absent from a snapshot are gone');
});

t.test('a several-part delta commits at its last part; a part out of order is refused and nothing applied', async (t) => {
  const big = delta(0, 7, {
    upsertPeers: Array.from({ length: 25 }, (_, i) => peer(`p${i}`)),
    declaration: { apiVersion: 'meshp/v1', node: 'n', mode: WIRE_MODE.ADOPTED, modules: [], convergePreviewId: '', untakes: [], releases: [] },
  });
  const parts = splitDelta(big, 10);
  t.equal(parts.length, 3);
  const a = atVersion3();
  t.same(a.receive(parts[0]!), { status: 'partial' });
  t.equal(a.appliedVersion, 3, 'not yet');
  refused(t, a, parts[2]!, 'MESHP_DELTA_GAP');
  for (const p of parts) a.receive(p);
  t.equal(a.appliedVersion, 7);
  t.equal(a.view.size, 25);
  t.equal(a.view.components.declaration?.mode, WIRE_MODE.ADOPTED);
});

t.test('the last applied deltas are kept for doctor', async (t) => {
  const a = new DeltaApplier({ keep: 2 });
  for (let v = 1; v <= 4; v++) a.receive(delta(v === 1 ? 0 : v - 1, v, { upsertPeers: [peer(`p${v}`)] }));
  t.same(
    a.recent.map((r) => r.toVersion),
    [3, 4],
  );
});

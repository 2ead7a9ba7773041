/**
 * Case 5 of issue 13, in the controller: inputs over their bounds are refused with
 * MESHP_INPUT_TOO_LARGE at the change that brings them in, and a snapshot of any number of peers
 * goes in parts each under the message limit, which an agent's applier reassembles.
 */
import t from 'tap';
import { DEFAULT_MAX_MESSAGE_BYTES } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { LIMITS, splitForWire, wireBudget } from '../../plugins/controller/src/limits.js';
import * as wire from '@meshp/protocol';
import type { StateDelta } from '@meshp/core';

const TOO_LARGE = { code: 'MESHP_INPUT_TOO_LARGE' };
// Its length on the wire, as the transport encodes it (its unset hash and signature empty).
const encodedLength = (d: StateDelta) =>
  wire.StateDelta.encode({ ...d, stateHash: d.stateHash ?? '', versionSignature: d.versionSignature ?? new Uint8Array(0) } as wire.StateDelta).finish()
    .byteLength;
const endpoint = (i: number, chars = 200) => `${'e'.repeat(chars - 12)}${String(i).padStart(6, '0')}:51820`;

function controller() {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  return c;
}

t.test('enrolment: endpoints, tags and names over their bounds are refused; the token is not burnt', async (t) => {
  const c = controller();
  const tok = c.createToken('n', { mode: 'adopted' });
  const many = Array.from({ length: LIMITS.endpoints + 1 }, (_, i) => endpoint(i, 30));
  t.throws(() => c.enrol(tok.token, { id: 'a', nodeKey: 'k', endpoints: many }), TOO_LARGE);
  t.throws(() => c.enrol(tok.token, { id: 'a', nodeKey: 'k', endpoints: ['x'.repeat(LIMITS.endpointChars + 1)] }), TOO_LARGE);
  t.throws(() => c.enrol(tok.token, { id: 'n'.repeat(LIMITS.nameChars + 1), nodeKey: 'k', endpoints: [] }), TOO_LARGE);
  t.equal(c.enrol(tok.token, { id: 'a', nodeKey: 'k', endpoints: [endpoint(1)] }).member.id, 'a', 'the token still enrols a node within bounds');
  t.throws(() => c.createToken('n', { tags: Array.from({ length: LIMITS.tags + 1 }, (_, i) => `t${i}`) }), TOO_LARGE);
});

t.test('catalogue, policy and assignment over their bounds are refused, nothing committed', async (t) => {
  const c = controller();
  const v = c.stateVersion('n');
  t.throws(() => c.defineModule('n', { name: 'big', files: [{ path: '/f', content: 'x'.repeat(LIMITS.fileBytes + 1) }] }), TOO_LARGE);
  t.throws(
    () =>
      c.setPolicy(
        'n',
        Array.from({ length: LIMITS.policyRules + 1 }, (_, i) => ({ from: `a${i}`, to: 'b' })),
      ),
    TOO_LARGE,
  );
  t.equal(c.stateVersion('n'), v, 'no change committed');
  c.join('n', { id: 'x', nodeKey: 'kx' });
  const half = 'y'.repeat(LIMITS.fileBytes - 1000);
  for (const name of ['m1', 'm2', 'm3']) c.defineModule('n', { name, files: [{ path: `/${name}`, content: half }] });
  c.assignModule('n', 'x', 'm1');
  c.assignModule('n', 'x', 'm2');
  t.throws(() => c.assignModule('n', 'x', 'm3'), { code: 'MESHP_INPUT_TOO_LARGE', message: /modules assigned to x/ });
  t.same(c.member('n', 'x')!.assigned, ['m1', 'm2']);
});

t.test('a snapshot larger than a message goes in parts by size, reassembled exactly', async (t) => {
  const c = controller();
  c.setPolicy('n', [{ from: 'a', to: 'a' }]);
  // 400 peers at their bound of endpoints: ~2.6 MB of view, more than one budget of 2 MiB.
  const endpoints = Array.from({ length: LIMITS.endpoints }, (_, i) => endpoint(i));
  for (let i = 0; i < 400; i += 1) c.join('n', { id: `p${i}`, nodeKey: `k${i}`, tags: ['a'], endpoints });
  const snapshot = c.deltaFor('n', 'p0')!;
  const parts = splitForWire(snapshot);
  const budget = wireBudget(DEFAULT_MAX_MESSAGE_BYTES);
  t.ok(JSON.stringify(snapshot).length > budget, `the snapshot (${JSON.stringify(snapshot).length} bytes) is over one budget`);
  t.ok(parts.length >= 2, `${parts.length} parts`);
  for (const p of parts) t.ok(Buffer.byteLength(JSON.stringify(p)) <= budget, `part ${p.part?.index}: ${JSON.stringify(p).length} bytes`);
  const split = new DeltaApplier();
  let last;
  for (const p of parts) last = split.receive(p);
  t.equal(last?.status, 'applied');
  const whole = new DeltaApplier();
  whole.receive(snapshot);
  t.equal(split.view.hash(), whole.view.hash(), 'the same view as the snapshot in one piece');
});

t.test('what cannot fit one message is refused with a code, not sent', async (t) => {
  const c = controller();
  c.join('n', { id: 'x', nodeKey: 'kx' });
  const snapshot = c.deltaFor('n', 'x')!;
  t.throws(() => splitForWire(snapshot, 10), { code: 'MESHP_MESSAGE_TOO_LARGE' });
});

t.test('the size check is the encoded length: at the limit whole, one byte under it split as before', async (t) => {
  const c = controller();
  c.setPolicy('n', [{ from: 'a', to: 'a' }]);
  // Non-ASCII endpoints too: UTF-8 longer than the string's length, which the check must not under-count.
  for (let i = 0; i < 30; i += 1) c.join('n', { id: `p${i}`, nodeKey: `k${i}`, tags: ['a'], endpoints: [`10.0.0.${i}:51820`, `hôte-€-😀-${i}.example:51820`] });
  const snapshot = c.deltaFor('n', 'p0')!;
  c.ack('n', 'p0', snapshot.toVersion, snapshot.stateHash!);
  c.join('n', { id: 'q', nodeKey: 'kq', tags: ['a'], endpoints: ['10.0.1.1:51820'] });
  const join = c.deltaFor('n', 'p0')!;
  for (const [name, delta] of [
    ['snapshot', snapshot],
    ['join delta', join],
  ] as const) {
    const encoded = encodedLength(delta);
    const json = Buffer.byteLength(JSON.stringify(delta));
    t.ok(json > encoded, `${name}: ${json} B of JSON, ${encoded} B encoded`);
    t.same(splitForWire(delta, encoded), [delta], `${name}: at its encoded length it goes whole`);
    t.same(splitForWire(delta, json - 1), [delta], `${name}: over the limit by JSON, under it encoded: whole`);
    if (delta.upsertPeers.length < 2) continue;
    const parts = splitForWire(delta, encoded - 1);
    t.ok(parts.length >= 2, `${name}: one byte under its encoded length it is split, in ${parts.length} parts`);
    for (const p of parts) {
      t.ok(Buffer.byteLength(JSON.stringify(p)) <= encoded - 1, `${name} part ${p.part?.index}: within the limit by JSON`);
      t.ok(encodedLength(p) <= encoded - 1, `${name} part ${p.part?.index}: within it encoded`);
    }
    const split = new DeltaApplier();
    let last;
    for (const p of parts) last = split.receive(p);
    t.equal(last?.status, 'applied');
    const whole = new DeltaApplier();
    whole.receive(delta);
    t.equal(split.view.hash(), whole.view.hash(), `${name}: the parts make the same view as the whole`);
  }
});

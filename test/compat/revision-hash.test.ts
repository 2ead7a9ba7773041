/**
 * Hash agreement across revisions: a field a later revision adds to a state component
 * (Declaration.converge_preview_id, not in v1-r1) is dropped by a v1-r1 agent's decoder. The
 * controller expects from each agent the hash over the fields its revision knows (Hello.revision),
 * so the v1-r1 agent's acks match and it is not sent snapshot after snapshot.
 */
import t from 'tap';
import type { StateDelta } from '@meshp/core';
import { PROTOCOL_REVISION } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { StateDelta as Current } from '@meshp/protocol';
import { StateDelta as R1 } from './v1-r1/control.js';

t.test('a v1-r1 agent and a current one both stay in hash agreement when a newer field is set', async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  for (const id of ['old', 'new']) c.join('n', { id, nodeKey: `k-${id}` });
  const agents = {
    old: { a: new DeltaApplier(), revision: 1, decode: (b: Uint8Array) => R1.decode(b) as unknown as StateDelta },
    new: { a: new DeltaApplier(), revision: PROTOCOL_REVISION, decode: (b: Uint8Array) => Current.decode(b) as StateDelta },
  };
  const round = (id: 'old' | 'new') => {
    const { a, decode } = agents[id];
    const d = c.deltaFor('n', id);
    if (!d) return null;
    const r = a.receive(decode(Current.encode(d as Parameters<typeof Current.encode>[0]).finish()));
    if (r.status !== 'applied') return null;
    return c.ack('n', id, r.ack.appliedVersion, r.ack.stateHash);
  };
  for (const id of ['old', 'new'] as const) {
    const h = agents[id].a.hello();
    c.hello('n', id, h.appliedVersion, h.stateHash, undefined, agents[id].revision);
    t.same(round(id), { accepted: true, snapshotPending: false }, `${id}: the snapshot acked with the hash expected`);
  }
  // The field v1-r1 does not know gets a value on both nodes.
  for (const id of ['old', 'new'] as const) c.recordConverged('n', id, `preview-of-${id}`);
  for (const id of ['old', 'new'] as const) {
    const r = round(id);
    t.same(
      r,
      { accepted: true, snapshotPending: false },
      `${id} (revision ${agents[id].revision}): the delta with converge_preview_id acked with the hash expected`,
    );
  }
  t.equal(agents.old.a.view.components.declaration?.convergePreviewId, undefined, 'the v1-r1 agent never saw the field');
  t.equal(agents.new.a.view.components.declaration?.convergePreviewId, 'preview-of-new', 'the current one did');
  t.same(
    c.listNodes('n').map((n) => [n.name, n.gap, n.diverged]),
    [
      ['new', 0, ''],
      ['old', 0, ''],
    ],
    'both at gap 0, neither diverged',
  );
  t.equal(c.deltaFor('n', 'old'), null, 'and nothing more goes to the v1-r1 agent (no snapshot loop)');
});

t.test('an agent built between releases (says revision 1, knows the newer field) is accepted too', async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n');
  c.join('n', { id: 'dev', nodeKey: 'k-dev' });
  const a = new DeltaApplier();
  const h = a.hello();
  c.hello('n', 'dev', h.appliedVersion, h.stateHash, undefined, 1);
  c.recordConverged('n', 'dev', 'preview-dev');
  const d = c.deltaFor('n', 'dev')!;
  const r = a.receive(Current.decode(Current.encode(d as Parameters<typeof Current.encode>[0]).finish()) as StateDelta);
  t.equal(r.status, 'applied');
  if (r.status === 'applied')
    t.same(c.ack('n', 'dev', r.ack.appliedVersion, r.ack.stateHash), { accepted: true, snapshotPending: false }, 'its hash over every field matches');
});

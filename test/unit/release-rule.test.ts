/**
 * release --restore's rule (issue 29), as a pure function: only a module's held files (an original
 * recorded, not the host's own) are considered; one unchanged since it was found is kept, one changed
 * or removed while held gets its original back, one that cannot be read blocks; a file the take owns
 * or another module's is not the release's; the id follows what was seen.
 */
import t from 'tap';
import type { OriginalRecord } from '@meshp/core';
import { heldFiles, planRelease, type Records, type Seen } from '@meshp/core/reconcile';

function original(key: string, module = 'web'): OriginalRecord {
  return {
    key,
    kind: 'file',
    module,
    original: new TextEncoder().encode('predecessor\n'),
    fingerprint: 'sha-pred:0640',
    foundAt: 'then',
    lastFingerprint: 'sha-pred:0640',
    changedAt: null,
    meta: { mode: 0o640, uid: 33, gid: 34 },
  };
}

const seen = (fingerprint: string): Seen => ({ digest: fingerprint, fingerprint, original: async () => new Uint8Array() });

const A = 'file:/etc/a.conf';
const B = 'file:/etc/b.conf';
const C = 'file:/etc/c.conf';
const D = 'file:/etc/d.conf';
const OWNED = 'file:/etc/owned.conf';
const OTHER = 'file:/etc/other.conf';

const records: Records = {
  originals: new Map([A, B, C, D, OWNED].map((k) => [k, original(k)] as const).concat([[OTHER, original(OTHER, 'db')]])),
  owned: new Map([[OWNED, { key: OWNED, kind: 'file', module: 'web', digest: 'sha-mesh:0644', at: 'now', made: false }]]),
  intents: new Map(),
};

t.test('only the held files of the module', async (t) => {
  t.same(heldFiles(records, 'web'), [A, B, C, D]);
  t.same(heldFiles(records, 'db'), [OTHER]);
});

t.test('unchanged kept, changed or removed restored, unreadable blocks', async (t) => {
  const s = new Map<string, Seen>([
    [A, seen('sha-pred:0640')],
    [B, seen('sha-edited:0640')],
    [C, null],
    [D, new Error('EACCES: permission denied')],
  ]);
  const p = planRelease('n1', 'web', records, s);
  t.match(p.steps, [
    { key: A, op: 'keep', what: /unchanged since it was found/ },
    { key: B, op: 'restore', what: /changed while held; its original back \(12 bytes, mode 0640, owner 33:34\)/ },
    { key: C, op: 'restore', what: /removed while held/ },
  ]);
  t.match(p.blocks, [{ key: D, code: 'MESHP_UNTAKE_UNREADABLE', reason: /EACCES/ }]);
  t.equal(p.steps.length, 3);
});

t.test('the id: the same for the same machine, another when a file changes', async (t) => {
  const one = new Map<string, Seen>([[A, seen('sha-pred:0640')]]);
  const id = planRelease('n1', 'web', records, one).id;
  t.equal(planRelease('n1', 'web', records, new Map(one)).id, id);
  t.not(planRelease('n1', 'web', records, new Map<string, Seen>([[A, seen('sha-x:0640')]])).id, id);
});

/**
 * Untake's rule (issue 29), as a pure function: it puts back only what the take changed. A found file
 * is restored from its recorded original; a file the assignment made stays; a file that was gone when the
 * module was taken is removed again; a found container is recreated; and whatever cannot be put back
 * faithfully (no original, changed since, image or volume gone) blocks the untake with its code.
 */
import t from 'tap';
import type { ModuleDecl, OriginalRecord, OwnedRecord, Restorability } from '@meshp/core';
import { planUntake, type Records, type Seen, type UntakeInput } from '@meshp/core/reconcile';

const CONF = '/etc/web/web.conf';
const FK = `file:${CONF}`;
const CK = 'container:web';
const MESH = 'sha-mesh:0644';

const web: ModuleDecl = {
  name: 'web',
  taken: true,
  files: [{ path: CONF, content: 'mesh\n' }],
  containers: [{ name: 'web', image: 'lab/web:2' }],
  openings: [{ port: 8080, protocol: 'tcp', path: 'forwarded' }],
};

function original(key: string, extra: Partial<OriginalRecord> = {}): OriginalRecord {
  return {
    key,
    kind: key.startsWith('file:') ? 'file' : 'container',
    module: 'web',
    original: new TextEncoder().encode('predecessor\n'),
    fingerprint: 'sha-pred:0640',
    foundAt: 'then',
    lastFingerprint: 'sha-pred:0640',
    changedAt: null,
    meta: { mode: 0o640, uid: 33, gid: 33 },
    ...extra,
  };
}

function owned(key: string, extra: Partial<OwnedRecord> = {}): OwnedRecord {
  return { key, kind: key.startsWith('file:') ? 'file' : 'container', module: 'web', digest: MESH, at: 'now', made: false, ...extra };
}

function seen(digest: string, fingerprint = digest): Seen {
  return { digest, fingerprint, original: async () => new Uint8Array() };
}

const restorable: Restorability = {
  image: 'present',
  imageId: 'sha256:abc',
  reference: 'lab/web:1',
  referenceMoved: false,
  volumesGone: [],
  volumes: ['web-data'],
};

function input(records: Partial<Records>, s: [string, Seen][], extra: Partial<UntakeInput> = {}): UntakeInput {
  return {
    node: 'n1',
    module: web,
    records: { owned: new Map(), originals: new Map(), intents: new Map(), ...records },
    seen: new Map(s),
    restorable: new Map([[CK, restorable]]),
    written: new Map([[FK, 'mesh\n']]),
    now: new Map(),
    ...extra,
  };
}

const byKey = <T extends { key: string }>(xs: T[], key: string) => xs.find((x) => x.key === key);

t.test('a found file and container are put back, and the openings the take added go', async (t) => {
  const p = planUntake(
    input(
      {
        owned: new Map([
          [FK, owned(FK)],
          [CK, owned(CK)],
        ]),
        originals: new Map([
          [FK, original(FK)],
          [CK, original(CK)],
        ]),
      },
      [
        [FK, seen(MESH)],
        [CK, seen(MESH)],
      ],
    ),
  );
  t.same(p.blocks, []);
  t.equal(byKey(p.steps, FK)?.op, 'restore');
  t.match(byKey(p.steps, FK)?.what, /mode 0640, owner 33:33/);
  t.equal(byKey(p.steps, CK)?.op, 'recreate');
  t.match(byKey(p.steps, CK)?.what, /lab\/web:1.*volumes web-data reattached/);
  t.equal(byKey(p.steps, 'opening:web/forwarded/tcp/8080')?.op, 'close');
  t.match(p.id, /^[0-9a-f]{16}$/);
});

t.test('untake changes only what the take changed: a held resource and a file the assignment made stay', async (t) => {
  const p = planUntake(
    input({ owned: new Map([[FK, owned(FK, { made: true })]]), originals: new Map([[CK, original(CK)]]) }, [
      [FK, seen(MESH)],
      [CK, seen('', 'pred-id|img')],
    ]),
  );
  t.same(p.blocks, []);
  t.equal(byKey(p.steps, FK)?.op, 'keep', 'made by the mesh where nothing was: an assigned module keeps it');
  t.notOk(byKey(p.steps, CK), 'the container is still held (never replaced): untake does not touch it');
  t.notOk(
    p.steps.some((s) => s.kind === 'opening'),
    'nothing is put back, so the module holds nothing found and its openings stay',
  );
});

t.test('a file that was gone when the module was taken is removed again', async (t) => {
  const gone = original(FK, { lastFingerprint: null, changedAt: 'before the take' });
  const p = planUntake(input({ owned: new Map([[FK, owned(FK)]]), originals: new Map([[FK, gone]]) }, [[FK, seen(MESH)]]));
  t.equal(byKey(p.steps, FK)?.op, 'remove');
});

t.test('each thing that cannot be put back faithfully blocks, with its code', async (t) => {
  const records = {
    owned: new Map([
      [FK, owned(FK)],
      [CK, owned(CK)],
    ]),
    originals: new Map([
      [FK, original(FK)],
      [CK, original(CK)],
    ]),
  };
  const changed = planUntake(
    input(
      records,
      [
        [FK, seen('sha-edited:0644')],
        [CK, seen(MESH)],
      ],
      { now: new Map([[FK, new TextEncoder().encode('mesh\nedited by hand\n')]]) },
    ),
  );
  t.equal(byKey(changed.blocks, FK)?.code, 'MESHP_UNTAKE_CHANGED');
  t.match(byKey(changed.blocks, FK)?.diff, /\+edited by hand/, 'the change untake would lose is shown as a diff');

  const imageGone = planUntake(
    input(
      records,
      [
        [FK, seen(MESH)],
        [CK, seen(MESH)],
      ],
      { restorable: new Map([[CK, { ...restorable, image: 'gone' as const }]]) },
    ),
  );
  t.equal(byKey(imageGone.blocks, CK)?.code, 'MESHP_UNTAKE_IMAGE_GONE');

  const volumeGone = planUntake(
    input(
      records,
      [
        [FK, seen(MESH)],
        [CK, seen(MESH)],
      ],
      { restorable: new Map([[CK, { ...restorable, volumesGone: ['web-data'] }]]) },
    ),
  );
  t.equal(byKey(volumeGone.blocks, CK)?.code, 'MESHP_UNTAKE_VOLUME_GONE');

  const replaced = planUntake(
    input(records, [
      [FK, seen(MESH)],
      [CK, seen('other-hash')],
    ]),
  );
  t.equal(byKey(replaced.blocks, CK)?.code, 'MESHP_UNTAKE_CHANGED', 'the mesh container replaced since by something else');

  const unrecorded = planUntake(input({ owned: new Map([[FK, owned(FK, { made: null })]]) }, [[FK, seen(MESH)]]));
  t.equal(byKey(unrecorded.blocks, FK)?.code, 'MESHP_UNTAKE_NO_ORIGINAL', 'owned, no original, and not recorded as made by the mesh');

  const removed = planUntake(
    input(records, [
      [FK, null],
      [CK, seen(MESH)],
    ]),
  );
  t.equal(byKey(removed.blocks, FK)?.code, 'MESHP_UNTAKE_CHANGED', 'removed since the take by something else');
});

t.test('the preview id follows what is there: another sighting, another id', async (t) => {
  const records = { owned: new Map([[FK, owned(FK)]]), originals: new Map([[FK, original(FK)]]) };
  const a = planUntake(input(records, [[FK, seen(MESH)]]));
  const b = planUntake(input(records, [[FK, seen(MESH)]]));
  const c = planUntake(input(records, [[FK, seen(MESH, 'another-inode')]]));
  t.equal(a.id, b.id);
  t.not(a.id, c.id);
});

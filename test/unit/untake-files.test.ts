/**
 * Untake of a module's files on a real root and host.db (issue 29): take then untake puts the found file
 * back byte for byte with its mode and owner, and the module is held again; take again works; a file
 * changed since the take, a stale preview id and a module not taken are refused with nothing changed.
 */
import t from 'tap';
import { chownSync, chmodSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { ModuleDecl } from '@meshp/core';
import { untake } from '@meshp/core/reconcile';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { bed, declaration, stateOf, type Bed } from '../helpers/host.js';
import type { Subtest } from '../helpers/tap-types.js';

const CONF = '/etc/web/web.conf';
const MADE = '/etc/web/mesh.conf';
const KEY = `file:${CONF}`;
const ROOT = process.getuid?.() === 0;

function web(taken: boolean): ModuleDecl {
  return {
    name: 'web',
    taken,
    files: [
      { path: CONF, content: 'mesh\n', mode: '0644' },
      { path: MADE, content: 'made by the mesh\n' },
    ],
  };
}

function found(b: Bed): Buffer {
  const at = join(b.root, CONF);
  mkdirSync(dirname(at), { recursive: true });
  const bytes = Buffer.from('predecessor\n\u00e9\0binary\n');
  writeFileSync(at, bytes);
  chmodSync(at, 0o640);
  if (ROOT) chownSync(at, 33, 34);
  return bytes;
}

async function prepared(t: Subtest): Promise<{ b: Bed; bytes: Buffer }> {
  const b = bed(t);
  const bytes = found(b);
  t.equal(stateOf(await b.apply(declaration('adopted', [web(false)])), KEY), 'held');
  t.equal(stateOf(await b.apply(declaration('adopted', [web(true)])), KEY), 'owned', 'taken');
  t.equal(readFileSync(join(b.root, CONF), 'utf8'), 'mesh\n');
  return { b, bytes };
}

async function untakeOn(b: Bed, options: Parameters<typeof untake>[3] = {}) {
  const h = b.host();
  try {
    return await untake(h, declaration('adopted', [web(true)]), 'web', options);
  } finally {
    await h.close();
  }
}

t.test('take then untake: the found file is its original again, byte for byte, mode and owner; held again', async (t) => {
  const { b, bytes } = await prepared(t);
  const preview = await untakeOn(b, { preview: true });
  t.same(
    preview.plan.steps.map((s) => [s.key, s.op]),
    [
      [`file:${MADE}`, 'keep'],
      [KEY, 'restore'],
    ],
  );
  t.equal(readFileSync(join(b.root, CONF), 'utf8'), 'mesh\n', 'the preview changed nothing');
  const done = await untakeOn(b, { previewId: preview.plan.id });
  t.ok(Buffer.from(readFileSync(join(b.root, CONF))).equals(bytes), 'byte for byte');
  const st = statSync(join(b.root, CONF));
  t.equal(st.mode & 0o7777, 0o640);
  if (ROOT) t.same([st.uid, st.gid], [33, 34], 'its owner');
  t.equal(stateOf(done.after!, KEY), 'held', 'found again and held');
  t.equal(readFileSync(join(b.root, MADE), 'utf8'), 'made by the mesh\n', 'the file the assignment made stays');
  const again = await b.apply(declaration('adopted', [web(false)]));
  t.equal(stateOf(again, KEY), 'held', 'a later reconcile of the assigned module keeps holding it');
  const retake = await b.apply(declaration('adopted', [web(true)]));
  t.equal(stateOf(retake, KEY), 'owned', 'take again works');
  t.equal(readFileSync(join(b.root, CONF), 'utf8'), 'mesh\n');
  const s = new SqliteHostStore(b.stateDir);
  const [orig] = (await s.listOriginals()).filter((o) => o.key === KEY);
  await s.close();
  t.ok(Buffer.from(orig!.original).equals(bytes), 'the original is still the one first recorded');
});

t.test('a file changed since the take is refused with its diff, nothing changed', async (t) => {
  const { b } = await prepared(t);
  writeFileSync(join(b.root, CONF), 'mesh\nedited by hand\n');
  const err = await untakeOn(b).then(
    () => null,
    (e: unknown) => e as { code: string; message: string },
  );
  t.equal(err?.code, 'MESHP_UNTAKE_CHANGED');
  t.match(err?.message, /\+edited by hand/);
  t.equal(readFileSync(join(b.root, CONF), 'utf8'), 'mesh\nedited by hand\n', 'nothing changed');
  const s = new SqliteHostStore(b.stateDir);
  t.ok(await s.getOwned(KEY), 'still the host own');
  t.equal(await s.getValue('untake.running'), null, 'no untake was started');
  await s.close();
});

t.test('a stale preview id and a module not taken are refused, nothing changed', async (t) => {
  const { b } = await prepared(t);
  const stale = await untakeOn(b, { previewId: '0000000000000000' }).catch((e: { code: string }) => e.code);
  t.equal(stale, 'MESHP_PREVIEW_STALE');
  t.equal(readFileSync(join(b.root, CONF), 'utf8'), 'mesh\n');
  const h = b.host();
  const notTaken = await untake(h, declaration('adopted', [web(false)]), 'web').catch((e: { code: string }) => e.code);
  await h.close();
  t.equal(notTaken, 'MESHP_UNTAKE_NOT_TAKEN');
  const h2 = b.host();
  const converged = await untake(h2, declaration('converged', [web(true)]), 'web').catch((e: { code: string }) => e.code);
  await h2.close();
  t.equal(converged, 'MESHP_LIFECYCLE');
});

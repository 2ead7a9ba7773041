/**
 * The file store by identity, not by path, on a real file system (a temporary root): symlinks
 * anywhere on a declared path, hard links, FIFOs, sockets, devices, folders, huge files, and a
 * file swapped between the plan and the write.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { existsSync, linkSync, lstatSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, symlinkSync, truncateSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { PLUGIN_API_VERSION, type ModuleDecl, type Plugin } from '@meshp/core';
import { LocalFileStore, LocalFilesPlugin } from '@meshp/files-local';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { bed, declaration, stateOf } from '../helpers/host.js';
import { assertPrivate } from '../helpers/modes.js';

const put = (root: string, p: string, content: string) => {
  mkdirSync(dirname(join(root, p)), { recursive: true });
  writeFileSync(join(root, p), content);
};
const read = (root: string, p: string) => readFileSync(join(root, p), 'utf8');
const reasonOf = (r: { report: { resources: { key: string; reason?: string }[] } }, key: string) => r.report.resources.find((x) => x.key === key)?.reason ?? '';
const mod = (name: string, taken: boolean, files: ModuleDecl['files']): ModuleDecl => ({ name, taken, files });

t.test('a held file is not reached through a symlinked folder inside the root (case 1)', async (t) => {
  const b = bed(t);
  put(b.root, '/etc/web/web.conf', 'found\n');
  symlinkSync('web', join(b.root, 'etc/alias'));
  const decl = declaration('adopted', [
    mod('web', false, [{ path: '/etc/web/web.conf', content: 'mesh\n' }]),
    mod('other', true, [{ path: '/etc/alias/web.conf', content: 'through the alias\n' }]),
  ]);
  for (let i = 0; i < 2; i += 1) {
    const r = await b.apply(decl);
    t.equal(stateOf(r, 'file:/etc/web/web.conf'), 'held', `apply ${i + 1}: held`);
    t.equal(stateOf(r, 'file:/etc/alias/web.conf'), 'refused');
    t.match(reasonOf(r, 'file:/etc/alias/web.conf'), /^MESHP_PATH_SYMLINK: /);
    t.equal(read(b.root, '/etc/web/web.conf'), 'found\n', `apply ${i + 1}: the held file is untouched`);
  }
});

t.test('two declared paths that are one file (a hard link) are both refused, nothing written', async (t) => {
  const b = bed(t);
  put(b.root, '/etc/web/web.conf', 'found\n');
  mkdirSync(join(b.root, 'etc/other'));
  linkSync(join(b.root, 'etc/web/web.conf'), join(b.root, 'etc/other/web.conf'));
  const r = await b.apply(
    declaration('adopted', [
      mod('web', false, [{ path: '/etc/web/web.conf', content: 'mesh\n' }]),
      mod('other', true, [{ path: '/etc/other/web.conf', content: 'other\n' }]),
    ]),
  );
  for (const k of ['file:/etc/web/web.conf', 'file:/etc/other/web.conf']) {
    t.equal(stateOf(r, k), 'refused', k);
    t.match(reasonOf(r, k), /^MESHP_FILE_ALIASED: \/etc\/other\/web\.conf and \/etc\/web\/web\.conf are one file/);
  }
  t.equal(read(b.root, '/etc/web/web.conf'), 'found\n');
  t.equal(statSync(join(b.root, 'etc/web/web.conf')).nlink, 2, 'the link is left as it was');
});

t.test('a held file is recorded by identity: a hard link to it made later is refused', async (t) => {
  const b = bed(t);
  put(b.root, '/etc/web/web.conf', 'found\n');
  const web = mod('web', false, [{ path: '/etc/web/web.conf', content: 'mesh\n' }]);
  await b.apply(declaration('adopted', [web]));
  const store = new SqliteHostStore(b.stateDir);
  const [orig] = await store.listOriginals();
  await store.close();
  const st = statSync(join(b.root, 'etc/web/web.conf'), { bigint: true });
  t.equal(orig!.identity, `${st.dev}:${st.ino}`, 'device and inode recorded');
  mkdirSync(join(b.root, 'srv'));
  linkSync(join(b.root, 'etc/web/web.conf'), join(b.root, 'srv/copy.conf'));
  // The holding module is no longer declared: its file is released, still on record by identity.
  const r = await b.apply(declaration('adopted', [mod('other', true, [{ path: '/srv/copy.conf', content: 'other\n' }])]));
  t.equal(stateOf(r, 'file:/srv/copy.conf'), 'refused');
  t.match(reasonOf(r, 'file:/srv/copy.conf'), /^MESHP_FILE_ALIASED: /);
  t.equal(read(b.root, '/etc/web/web.conf'), 'found\n');
});

t.test('an owned file swapped for a symlink: no write, no removal through it (case 2)', async (t) => {
  const b = bed(t);
  const app = mod('app', true, [{ path: '/srv/app/app.conf', content: 'app\n' }]);
  await b.apply(declaration('converged', [app]));
  put(b.root, '/victim/secret', 'precious\n');
  rmSync(join(b.root, 'srv/app/app.conf'));
  symlinkSync('../../victim/secret', join(b.root, 'srv/app/app.conf'));
  const r = await b.apply(declaration('converged', [app]));
  t.equal(stateOf(r, 'file:/srv/app/app.conf'), 'refused');
  t.match(reasonOf(r, 'file:/srv/app/app.conf'), /^MESHP_PATH_SYMLINK: /);
  t.equal(read(b.root, '/victim/secret'), 'precious\n', 'nothing written through the link');
  const gone = await b.apply(declaration('converged', [mod('app', true, [])]));
  t.equal(stateOf(gone, 'file:/srv/app/app.conf'), 'refused', 'the removal is refused');
  t.equal(read(b.root, '/victim/secret'), 'precious\n', 'the link target is not removed');
  t.ok(lstatSync(join(b.root, 'srv/app/app.conf')).isSymbolicLink(), 'the link itself is left for the operator');
  // A symlinked folder on the way is refused the same, whether it points in or out of the root.
  rmSync(join(b.root, 'srv/app'), { recursive: true });
  symlinkSync('../victim', join(b.root, 'srv/app'));
  const viaDir = await b.apply(declaration('converged', [app]));
  t.match(reasonOf(viaDir, 'file:/srv/app/app.conf'), /^MESHP_PATH_SYMLINK: /);
  t.notOk(existsSync(join(b.root, 'victim/app.conf')));
});

t.test('FIFOs, sockets, devices and folders at a declared path are refused, never opened', async (t) => {
  const b = bed(t);
  mkdirSync(join(b.root, 'etc'), { recursive: true });
  t.equal(spawnSync('mkfifo', [join(b.root, 'etc/fifo')]).status, 0);
  t.equal(spawnSync('mknod', [join(b.root, 'etc/null'), 'c', '1', '3']).status, 0, 'a device made (root)');
  mkdirSync(join(b.root, 'etc/dir'));
  const server = createServer();
  await new Promise<void>((res) => server.listen(join(b.root, 'etc/sock'), res));
  t.teardown(() => server.close());
  const paths = ['/etc/fifo', '/etc/null', '/etc/dir', '/etc/sock'];
  const r = await b.apply(
    declaration('converged', [
      mod(
        'm',
        true,
        paths.map((path) => ({ path, content: 'x' })),
      ),
    ]),
  );
  for (const p of paths) {
    t.equal(stateOf(r, `file:${p}`), 'refused', p);
    t.match(reasonOf(r, `file:${p}`), /^MESHP_FILE_NOT_REGULAR: /, p);
  }
  t.ok(lstatSync(join(b.root, 'etc/fifo')).isFIFO(), 'the FIFO is left as it was');
  t.ok(lstatSync(join(b.root, 'etc/dir')).isDirectory());
});

t.test('a file over the size limit is refused without being read', async (t) => {
  const b = bed(t);
  mkdirSync(join(b.root, 'var'), { recursive: true });
  writeFileSync(join(b.root, 'var/huge'), '');
  truncateSync(join(b.root, 'var/huge'), 700 * 1024 * 1024); // sparse: no disk used
  const r = await b.apply(declaration('adopted', [mod('m', false, [{ path: '/var/huge', content: 'x' }])]));
  t.equal(stateOf(r, 'file:/var/huge'), 'refused');
  t.match(reasonOf(r, 'file:/var/huge'), /^MESHP_FILE_TOO_LARGE: \/var\/huge holds 734003200 bytes/);
  // The limit is the operator's to set.
  put(b.root, '/etc/small', '0123456789');
  const store = new LocalFileStore(b.root, { maxFileBytes: 8 });
  await t.rejects(store.read('/etc/small'), { code: 'MESHP_FILE_TOO_LARGE' });
  t.same((await new LocalFileStore(b.root, { maxFileBytes: 10 }).read('/etc/small'))?.bytes.length, 10);
  // And through the plugin's environment, as an agent is configured.
  process.env.MESHP_MAX_FILE_BYTES = '8';
  t.teardown(() => delete process.env.MESHP_MAX_FILE_BYTES);
  const limited = await b.apply(declaration('adopted', [mod('m', false, [{ path: '/etc/small', content: 'x' }])]));
  t.match(reasonOf(limited, 'file:/etc/small'), /^MESHP_FILE_TOO_LARGE: \/etc\/small holds 10 bytes, over the limit of 8/);
  delete process.env.MESHP_MAX_FILE_BYTES;
  t.equal(stateOf(await b.apply(declaration('adopted', [mod('m', false, [{ path: '/etc/small', content: 'x' }])])), 'file:/etc/small'), 'held');
  t.ok(new LocalFilesPlugin({ maxFileBytes: 8 }));
});

/** A plugin whose beforeApply hook swaps the file the plan saw: the race, made deterministic. */
function swapper(root: string, path: string): Plugin {
  return {
    name: 'swapper',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.beforeApply.tapPromise('swapper', async () => {
        const target = join(root, path);
        mkdirSync(dirname(target), { recursive: true });
        writeFileSync(`${target}.new`, 'appeared meanwhile\n');
        renameSync(`${target}.new`, target);
        return undefined;
      });
    },
  };
}

t.test('a target that is no longer the file the plan saw is not written', async (t) => {
  for (const how of ['replace', 'create'] as const) {
    const b = bed(t);
    if (how === 'replace') put(b.root, '/etc/app.conf', 'found\n');
    const r = await b.apply(declaration('converged', [mod('m', true, [{ path: '/etc/app.conf', content: 'mesh\n' }])]), {
      extra: [swapper(b.root, '/etc/app.conf')],
    });
    t.equal(stateOf(r, 'file:/etc/app.conf'), 'refused', how);
    t.match(reasonOf(r, 'file:/etc/app.conf'), /^MESHP_FILE_SWAPPED: /, how);
    t.equal(read(b.root, '/etc/app.conf'), 'appeared meanwhile\n', `${how}: what appeared is kept`);
  }
});

t.test('writes leave no temp file and record the identity written', async (t) => {
  const b = bed(t);
  await b.apply(declaration('converged', [mod('m', true, [{ path: '/etc/a/b/c.conf', content: 'c\n', mode: '0640' }])]));
  const st = statSync(join(b.root, 'etc/a/b/c.conf'), { bigint: true });
  t.equal(Number(st.mode) & 0o7777, 0o640);
  const store = new SqliteHostStore(b.stateDir);
  const [owned] = await store.listOwned();
  await store.close();
  t.equal(owned!.identity, `${st.dev}:${st.ino}`);
  assertPrivate(t, b.stateDir);
  t.same(
    spawnSync('ls', ['-A', join(b.root, 'etc/a/b')], { encoding: 'utf8' })
      .stdout.trim()
      .split('\n'),
    ['c.conf'],
  );
});

t.test('a host.db from before identities is migrated in place', async (t) => {
  const b = bed(t);
  mkdirSync(b.stateDir, { recursive: true });
  const old = new Database(join(b.stateDir, 'host.db'));
  old.exec(`CREATE TABLE owned (key TEXT PRIMARY KEY, kind TEXT NOT NULL, module TEXT NOT NULL, digest TEXT NOT NULL, at TEXT NOT NULL);
    CREATE TABLE originals (key TEXT PRIMARY KEY, kind TEXT NOT NULL, module TEXT NOT NULL, original BLOB NOT NULL,
      fingerprint TEXT NOT NULL, found_at TEXT NOT NULL, last_fingerprint TEXT, changed_at TEXT);
    INSERT INTO owned VALUES ('file:/etc/x', 'file', 'm', 'd', 'then');`);
  old.close();
  const store = new SqliteHostStore(b.stateDir);
  t.same(await store.listOwned(), [{ key: 'file:/etc/x', kind: 'file', module: 'm', digest: 'd', at: 'then', identity: null, made: null }]); // made: not recorded before issue 29
  await store.recordOwned({ key: 'file:/etc/y', kind: 'file', module: 'm', digest: 'd', at: 'now', identity: '1:2' });
  t.equal((await store.getOwned('file:/etc/y'))?.identity, '1:2');
  await store.close();
  const again = new SqliteHostStore(b.stateDir); // a second open runs nothing twice
  t.equal((await again.listOwned()).length, 2);
  await again.close();
});

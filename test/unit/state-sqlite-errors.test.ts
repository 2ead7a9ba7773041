/**
 * host.db's failures by condition (issue 24, plugins/state-sqlite/src/store-errors.ts): a full disk
 * is MESHP_STORE_FULL, an I/O error only when the filesystem has no room; damage alone is
 * MESHP_STATE_CORRUPT; a lock is MESHP_STATE_LOCKED; each names the file. The full disk itself is
 * test/integration/host-store-full.test.ts, a damaged page host-store-damaged.test.ts.
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MeshpError, isMeshpError } from '@meshp/core';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { FULL_BELOW_BYTES, spaceLeft, storeError } from '../../plugins/state-sqlite/src/store-errors.js';

const FILE = '/var/lib/meshp/host.db';
const sqlite = (code: string, message: string) => Object.assign(new Error(message), { code });
const room = () => ({ bytes: 10 * FULL_BELOW_BYTES, inodes: 1000 });
const full = () => ({ bytes: 4096, inodes: 1000 });
const noInodes = () => ({ bytes: 10 * FULL_BELOW_BYTES, inodes: 0 });

t.test('each condition its code, naming the file and what was being done', async (t) => {
  const cases: [Error & { code: string }, () => { bytes: number; inodes: number | null }, string][] = [
    [sqlite('SQLITE_FULL', 'database or disk is full'), room, 'MESHP_STORE_FULL'],
    [sqlite('SQLITE_IOERR_SHMSIZE', 'disk I/O error'), full, 'MESHP_STORE_FULL'],
    [sqlite('SQLITE_IOERR_WRITE', 'disk I/O error'), noInodes, 'MESHP_STORE_FULL'],
    [Object.assign(new Error('ENOSPC: no space left on device, open'), { code: 'ENOSPC' }), room, 'MESHP_STORE_FULL'],
    // An I/O error on a disk with room is not called full, nor damage.
    [sqlite('SQLITE_IOERR_READ', 'disk I/O error'), room, 'MESHP_PLUGIN_FAILED'],
    [sqlite('SQLITE_CORRUPT', 'database disk image is malformed'), full, 'MESHP_STATE_CORRUPT'],
    [sqlite('SQLITE_CORRUPT_INDEX', 'database disk image is malformed'), room, 'MESHP_STATE_CORRUPT'],
    [sqlite('SQLITE_NOTADB', 'file is not a database'), room, 'MESHP_STATE_CORRUPT'],
    [sqlite('SQLITE_BUSY', 'database is locked'), room, 'MESHP_STATE_LOCKED'],
    [sqlite('SQLITE_LOCKED_SHAREDCACHE', 'database table is locked'), room, 'MESHP_STATE_LOCKED'],
    [sqlite('SQLITE_CANTOPEN', 'unable to open database file'), room, 'MESHP_PLUGIN_FAILED'],
  ];
  for (const [e, space, code] of cases) {
    const out = storeError(e, FILE, 'recording the intent to write file:/etc/a', space);
    t.ok(isMeshpError(out), `${e.code} is coded`);
    if (!isMeshpError(out)) continue;
    t.equal(out.code, code, `${e.code} → ${code}`);
    t.match(out.message, /^\/var\/lib\/meshp\/host\.db[: ]/, 'the file first');
    t.match(out.message, /recording the intent to write file:\/etc\/a/, 'what was being done');
    t.equal(out.cause, e, 'the cause kept');
  }
  const said = storeError(sqlite('SQLITE_IOERR_SHMSIZE', 'disk I/O error'), FILE, 'opening it', full) as MeshpError;
  t.equal(
    said.oneLine(),
    'MESHP_STORE_FULL: /var/lib/meshp/host.db: the disk under it is full (4 KiB free): opening it was refused, nothing in it changed (SQLITE_IOERR_SHMSIZE: disk I/O error)',
  );
});

t.test('what is not SQLite passes through as it is', async (t) => {
  const coded = new MeshpError('MESHP_STATE_UNSAFE', 'state folder is a symlink');
  t.equal(storeError(coded, FILE, 'opening it', room), coded);
  const other = new TypeError('x is not a function');
  t.equal(storeError(other, FILE, 'opening it', room), other);
});

t.test('free space is read with statfs, the way root may use it', async (t) => {
  const s = spaceLeft(tmpdir());
  t.ok(s && s.bytes > 0, 'this machine has room in its temp folder');
  t.equal(spaceLeft('/no/such/folder/at/all'), null, 'not readable: null (never called full)');
});

t.test('a host.db that is not a database is refused MESHP_STATE_CORRUPT naming it, and left as it is', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-notadb-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'host.db'), Buffer.alloc(8192, 0x41), { mode: 0o600 });
  t.throws(() => new SqliteHostStore(dir), { code: 'MESHP_STATE_CORRUPT', message: new RegExp(`^${join(dir, 'host.db')} is damaged`) });
  t.same(readFileSync(join(dir, 'host.db')), Buffer.alloc(8192, 0x41), 'not written');
});

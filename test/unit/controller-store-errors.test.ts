/**
 * The controller's store errors by condition and their error paths (issue 24), on real SQLite
 * files in a temp folder (sinon only to make a write throw): a damaged file is MESHP_STATE_CORRUPT
 * naming it, a file another connection holds locked is MESHP_STORE_UNAVAILABLE; a flush the store
 * refuses keeps its records and is tried again by itself; a join the store refuses leaves its
 * enrolment token usable; the store's health goes down and up with it.
 */
import t from 'tap';
import sinon from 'sinon';
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthStore, Controller, SqliteControllerStore, storeError } from '@meshp/controller';

const folder = (t: { teardown(fn: () => void): void }) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-storeerr-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};
const key = (i: string) => Buffer.from(`key-${i}`).toString('base64');
const full = () => new Database.SqliteError('database or disk is full', 'SQLITE_FULL');
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

t.test('a file that is not a database is MESHP_STATE_CORRUPT, naming it, for both stores', async (t) => {
  const file = join(folder(t), 'controller.db');
  writeFileSync(file, Buffer.alloc(8192, 0x5a), { mode: 0o600 });
  t.throws(() => new SqliteControllerStore(file), { code: 'MESHP_STATE_CORRUPT', message: new RegExp(file.replace(/[.]/g, '\\.')) });
  t.throws(() => new AuthStore(file), { code: 'MESHP_STATE_CORRUPT', message: new RegExp(file.replace(/[.]/g, '\\.')) });
});

t.test('the classifier: full is MESHP_STORE_FULL, damage MESHP_STATE_CORRUPT, busy and locked MESHP_STORE_UNAVAILABLE', async (t) => {
  const e = (code: string) => new Database.SqliteError(code, code);
  t.equal(storeError(e('SQLITE_FULL'), '/x/controller.db').code, 'MESHP_STORE_FULL');
  t.equal(storeError(e('SQLITE_CORRUPT'), '/x/controller.db').code, 'MESHP_STATE_CORRUPT');
  t.match(storeError(e('SQLITE_CORRUPT_INDEX'), '/x/controller.db').message, /\/x\/controller\.db/);
  t.equal(storeError(e('SQLITE_NOTADB'), '/x/controller.db').code, 'MESHP_STATE_CORRUPT');
  t.equal(storeError(e('SQLITE_BUSY'), '/x/controller.db').code, 'MESHP_STORE_UNAVAILABLE');
  t.equal(storeError(e('SQLITE_LOCKED'), '/x/controller.db').code, 'MESHP_STORE_UNAVAILABLE');
  // An I/O error with room left on the filesystem is not a full disk (the folder here has room).
  t.equal(storeError(e('SQLITE_IOERR_WRITE'), join(folder(t), 'controller.db')).code, 'MESHP_STORE_UNAVAILABLE');
});

t.test('a file locked by another connection: the change is refused MESHP_STORE_UNAVAILABLE, memory unchanged, then taken', async (t) => {
  const file = join(folder(t), 'controller.db');
  const c = new Controller(new SqliteControllerStore(file));
  t.teardown(() => c.close());
  c.createNetwork('n');
  c.join('n', { id: 'a', nodeKey: key('a'), tags: ['web'] });
  const other = new Database(file);
  t.teardown(() => other.close());
  other.exec('BEGIN IMMEDIATE');
  const v = c.stateVersion('n');
  t.throws(() => c.setPolicy('n', [{ from: 'web', to: 'web' }]), { code: 'MESHP_STORE_UNAVAILABLE' });
  t.equal(c.stateVersion('n'), v, 'the version is where it was');
  t.same(c.policy('n'), [], 'the policy is where it was');
  t.equal(c.storeHealth.up, false, 'the store is down');
  t.equal(c.storeHealth.view().lastCode, 'MESHP_STORE_UNAVAILABLE');
  other.exec('ROLLBACK');
  t.equal(c.setPolicy('n', [{ from: 'web', to: 'web' }]), v + 1, 'taken once the lock is gone');
  t.equal(c.storeHealth.up, true, 'the store is up again');
});

t.test('a flush the store refuses keeps its records and is tried again by itself', async (t) => {
  const file = join(folder(t), 'controller.db');
  const store = new SqliteControllerStore(file);
  const c = new Controller(store, { syncFlushMs: 20 });
  t.teardown(() => c.close());
  c.createNetwork('n');
  c.join('n', { id: 'a', nodeKey: key('a'), tags: ['web'] });
  c.flushSync();
  const fault = sinon.stub(store, 'putSync').throws(full());
  c.report('n', 'a', { firewallKind: 'nftables', held: 3 });
  t.throws(() => c.flushSync(), { code: 'MESHP_STORE_FULL' }, 'asked now, the flush says why it failed');
  await sleep(200); // the timer's tries fail too, and end nothing
  t.ok(fault.callCount >= 2, `tried again by itself (${fault.callCount} tries)`);
  t.equal(c.storeHealth.up, false, 'the store is down meanwhile');
  const held = () => new Controller(new SqliteControllerStore(file)).listNodes('n')[0]!.held;
  t.equal(held(), 0, 'the file does not hold the report yet');
  fault.restore();
  // The next try comes by itself (the longest wait between two is 5 s).
  for (let waited = 0; !c.storeHealth.up && waited < 7_000; waited += 50) await sleep(50);
  t.equal(c.storeHealth.up, true, 'up again');
  t.equal(held(), 3, 'the record kept through the failures is on the file');
});

t.test('an enrolment whose join the store refuses leaves its token usable', async (t) => {
  const file = join(folder(t), 'controller.db');
  const store = new SqliteControllerStore(file);
  const c = new Controller(store);
  t.teardown(() => c.close());
  c.createNetwork('n');
  const tok = c.createToken('n', { tags: ['web'] });
  const fault = sinon.stub(store, 'putMember').throws(full());
  t.throws(() => c.enrol(tok.token, { id: 'a', nodeKey: key('a') }), { code: 'MESHP_STORE_FULL' });
  t.equal(c.members('n').length, 0, 'no member');
  fault.restore();
  t.equal(c.enrol(tok.token, { id: 'a', nodeKey: key('a') }).member.id, 'a', 'the same token enrols once the store takes it');
  t.throws(() => c.enrol(tok.token, { id: 'b', nodeKey: key('b') }), { code: 'MESHP_TOKEN_INVALID' }, 'and only once');
  const made = sinon.stub(store, 'putToken').throws(full());
  let lost: string | undefined;
  t.throws(() => (lost = c.createToken('n').token), { code: 'MESHP_STORE_FULL' });
  made.restore();
  t.equal(lost, undefined, 'a token the store refused is not handed out');
});

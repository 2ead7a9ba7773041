/**
 * Case 4 of issue 13: host.db and controller.db are readable by root only, even when the state
 * folder existed with mode 0755 and the files with 0644; what was tightened is said on stderr.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller, SqliteControllerStore } from '@meshp/controller';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { MESHP } from '../helpers/cli.js';
import { assertPrivate } from '../helpers/modes.js';

function wideFolder(t: { teardown(fn: () => void): void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-private-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  chmodSync(dir, 0o755); // a folder anyone may list, as an operator's mkdir leaves it
  return dir;
}

/** Can user nobody read the file? (The test runs as root; root reads anything.) */
function nobodyReads(file: string): boolean {
  return spawnSync('runuser', ['-u', 'nobody', '--', 'cat', file], { stdio: 'ignore' }).status === 0;
}

t.test('host.db: folder 0755 and a file 0644 found, both tightened and said', async (t) => {
  const dir = wideFolder(t);
  const state = join(dir, 'state');
  mkdirSync(state, { mode: 0o755 });
  chmodSync(state, 0o755);
  // A secret as the agent keeps it, in a host.db made by an earlier version with 0644.
  let store = new SqliteHostStore(state);
  await store.setValue('credential', { secret: 'agent-secret' });
  await store.close();
  chmodSync(state, 0o755);
  chmodSync(join(state, 'host.db'), 0o644);
  t.equal(nobodyReads(join(state, 'host.db')), true, 'before: user nobody reads host.db');
  // The real CLI opens the store: what it tightened is said on stderr, stdout stays the report.
  const r = spawnSync(process.execPath, [MESHP, 'host', 'status', '--state', state], { encoding: 'utf8' });
  t.match(r.stderr, new RegExp(`meshp: state folder ${state} had mode 0755; tightened to 0700`));
  t.match(r.stderr, /host\.db had mode 0644; tightened to 0600/);
  assertPrivate(t, state);
  t.equal(nobodyReads(join(state, 'host.db')), false, 'after: user nobody cannot read host.db');
  store = new SqliteHostStore(state);
  t.same(store.tightened, [], 'nothing left to tighten the second time');
  await store.close();
});

t.test('a fresh state folder is made 0700 and host.db 0600, whatever the umask', async (t) => {
  const dir = wideFolder(t);
  const old = process.umask(0o000);
  t.teardown(() => void process.umask(old));
  const store = new SqliteHostStore(join(dir, 'fresh'));
  await store.setValue('k', 1);
  assertPrivate(t, join(dir, 'fresh'));
  t.equal(statSync(join(dir, 'fresh', 'host.db-wal')).mode & 0o777, 0o600, 'the WAL too');
  await store.close();
});

t.test('controller.db: a wide folder and files tightened; catalogue contents unreadable by others', async (t) => {
  const dir = wideFolder(t);
  const file = join(dir, 'controller.db');
  writeFileSync(file, '');
  chmodSync(file, 0o644);
  const store = new SqliteControllerStore(file);
  t.match(store.tightened.join('\n'), /state folder .* had mode 0755; tightened to 0700/);
  t.match(store.tightened.join('\n'), /controller\.db had mode 0644; tightened to 0600/);
  const c = new Controller(store);
  c.createNetwork('default');
  assertPrivate(t, dir);
  t.equal(nobodyReads(file), false);
});

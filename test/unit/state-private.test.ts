/**
 * Case 4 of issue 13: host.db and controller.db are readable by root only, even when the state
 * folder existed with mode 0755 and the files with 0644; what was tightened is said on stderr.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
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

/** The real CLI on a state folder: its exit code and stderr. */
const hostStatus = (state: string) => spawnSync(process.execPath, [MESHP, 'host', 'status', '--state', state], { encoding: 'utf8' });

t.test('what others could write is refused with a code, never tightened and used', async (t) => {
  const dir = wideFolder(t);
  writeFileSync(join(dir, 'victim'), 'not meshp\n');
  chmodSync(join(dir, 'victim'), 0o644);

  // A folder anyone could write, with a link planted where host.db goes.
  const open = join(dir, 'open');
  mkdirSync(open);
  chmodSync(open, 0o777);
  symlinkSync(join(dir, 'victim'), join(open, 'host.db'));
  let r = hostStatus(open);
  t.not(r.status, 0, 'refused');
  t.match(r.stderr, /MESHP_STATE_UNSAFE: state folder .*open has mode 0777: others could have put files or links in it/);
  t.equal(statSync(open).mode & 0o7777, 0o777, 'the folder is left as found, not tightened and used');
  t.equal(statSync(join(dir, 'victim')).mode & 0o7777, 0o644, 'the link target is not chmodded');
  t.equal(readFileSync(join(dir, 'victim'), 'utf8'), 'not meshp\n');

  // Group-writable is the same.
  chmodSync(open, 0o770);
  t.match(hostStatus(open).stderr, /MESHP_STATE_UNSAFE: .*mode 0770/);

  // A folder of another user's, even 0700: its owner can widen it again.
  const theirs = join(dir, 'theirs');
  mkdirSync(theirs, { mode: 0o700 });
  writeFileSync(join(theirs, 'host.db'), '');
  chmodSync(join(theirs, 'host.db'), 0o644);
  chownSync(join(theirs, 'host.db'), 65534, 65534);
  chownSync(theirs, 65534, 65534);
  r = hostStatus(theirs);
  t.match(r.stderr, /MESHP_STATE_UNSAFE: state folder .*theirs belongs to uid 65534/);
  t.equal(statSync(join(theirs, 'host.db')).mode & 0o7777, 0o644, 'nothing in it is touched');
  t.same(readdirSync(theirs), ['host.db'], 'nothing made in it');

  // A private folder, but host.db is a link (planted when it was wide) or a hard link.
  const linked = join(dir, 'linked');
  mkdirSync(linked, { mode: 0o700 });
  symlinkSync(join(dir, 'victim'), join(linked, 'host.db'));
  t.match(hostStatus(linked).stderr, /MESHP_STATE_UNSAFE: .*linked\/host\.db is a symlink/);
  t.equal(statSync(join(dir, 'victim')).mode & 0o7777, 0o644, 'its target is not chmodded');
  rmSync(join(linked, 'host.db'));
  linkSync(join(dir, 'victim'), join(linked, 'host.db'));
  t.match(hostStatus(linked).stderr, /MESHP_STATE_UNSAFE: .*host\.db has 2 names \(a hard link\)/);
  t.equal(readFileSync(join(dir, 'victim'), 'utf8'), 'not meshp\n', 'nothing written to it');

  // The controller's store in a shared folder such as /tmp (1777): refused, the folder untouched.
  const shared = join(dir, 'shared');
  mkdirSync(shared);
  chmodSync(shared, 0o1777);
  t.throws(() => new SqliteControllerStore(join(shared, 'controller.db')), { code: 'MESHP_STATE_UNSAFE' });
  t.equal(statSync(shared).mode & 0o7777, 0o1777);
  t.notOk(existsSync(join(shared, 'controller.db')));
});

t.test('a config that names plugins is refused when others could write it', async (t) => {
  const { readPluginConfig } = await import('../../bin/src/plugins/load.js');
  const dir = wideFolder(t);
  const file = join(dir, 'agent.json');
  writeFileSync(file, JSON.stringify({ plugins: ['./evil.mjs'] }));
  chmodSync(file, 0o644);
  t.same(
    readPluginConfig(file).map((s) => s.module),
    ['./evil.mjs'],
    "0644, root's: read",
  );
  for (const mode of [0o666, 0o664]) {
    chmodSync(file, mode);
    t.throws(() => readPluginConfig(file), { code: 'MESHP_STATE_UNSAFE', message: /others could change the code it makes meshp run/ }, mode.toString(8));
  }
  chmodSync(file, 0o644);
  chownSync(file, 65534, 65534);
  t.throws(() => readPluginConfig(file), { code: 'MESHP_STATE_UNSAFE', message: /belongs to uid 65534/ }, "another user's");
});

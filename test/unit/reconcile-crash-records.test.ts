import t from 'tap';
import { mkdirSync, writeFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { bed, declaration, stateOf } from '../helpers/host.js';
import { parseMode, sha256 } from '@meshp/core/reconcile';
import { assertPrivate } from '../helpers/modes.js';

t.test('an interrupted write of the host own file is recognised on restart, not taken for found', async (t) => {
  const b = bed(t);
  // The state a kill between "write" and "record owned" leaves: an intent, and the file as meant.
  const content = 'mesh\n';
  const s = new SqliteHostStore(b.stateDir);
  assertPrivate(t, b.stateDir); // issue 13: the state folder 0700, its database 0600
  const digest = `${sha256(content)}:${parseMode('0644').toString(8).padStart(4, '0')}`;
  await s.recordIntent({ key: 'file:/etc/a.conf', kind: 'file', module: 'web', digest, at: new Date().toISOString() });
  await s.close();
  mkdirSync(join(b.root, 'etc'), { recursive: true });
  writeFileSync(join(b.root, 'etc/a.conf'), content, { mode: 0o644 });
  const r = await b.apply(declaration('adopted', [{ name: 'web', taken: false, files: [{ path: '/etc/a.conf', content, mode: '0644' }] }]));
  t.equal(stateOf(r, 'file:/etc/a.conf'), 'owned');
  const s2 = new SqliteHostStore(b.stateDir);
  t.same(await s2.listOriginals(), [], 'no original: it was never found');
  t.same(await s2.listIntents(), [], 'the intent is settled');
  await s2.close();
});

t.test('an intent whose write never happened, with another writer since, is found and held', async (t) => {
  const b = bed(t);
  const s = new SqliteHostStore(b.stateDir);
  await s.recordIntent({ key: 'file:/etc/a.conf', kind: 'file', module: 'web', digest: 'something-else', at: new Date().toISOString() });
  await s.close();
  mkdirSync(join(b.root, 'etc'), { recursive: true });
  writeFileSync(join(b.root, 'etc/a.conf'), 'written by the predecessor');
  const r = await b.apply(declaration('adopted', [{ name: 'web', taken: false, files: [{ path: '/etc/a.conf', content: 'mesh' }] }]));
  t.equal(stateOf(r, 'file:/etc/a.conf'), 'held');
  t.equal(readFileSync(join(b.root, 'etc/a.conf'), 'utf8'), 'written by the predecessor');
});

/**
 * Issue 31 (ADR 0044): the sync record as a store row — the restart fields as columns, the rest a
 * small document, `recent` not written — read back as the record a restart needs; a row of before the
 * columns (its whole record in the document) still read as it was; a field added later kept.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { syncFromRow, syncToRow, type SyncRecord } from '@meshp/core/delta';
import { Controller, SqliteControllerStore } from '@meshp/controller';

const record: SyncRecord = {
  applied: 7,
  appliedHash: 'a'.repeat(64),
  sent: 9,
  basis: 11,
  target: 9,
  revision: 3,
  mismatches: 1,
  snapshotNotBefore: 0,
  graced: ['p1'],
  expectations: [
    {
      version: 9,
      hash: 'b'.repeat(64),
      digest: { peerSum: 'ff', peerCount: 2, components: { dns: null, filter: 'c', routeGroups: null, relays: null, tunnel: null, declaration: null } },
    },
  ],
  snapshotPending: false,
  recent: [{ fromVersion: 7, toVersion: 9, upserts: 1, removals: 0, components: [], expectedHash: 'b'.repeat(64), at: '2026-12-03T00:00:00.000Z' }],
  lastAgentHash: 'a'.repeat(64),
  firewallKind: 'nftables',
  held: 1,
  changed: 2,
  requestedVersion: 4,
};

t.test('a record round-trips through its row, without the last deltas sent', async (t) => {
  const row = syncToRow(record);
  t.notMatch(row.doc, /recent|expectations|appliedHash/, 'the document holds only what has no column');
  t.same(syncFromRow(row), { ...record, recent: [] });
  // As PostgreSQL hands them back: BIGINT as text, the document parsed.
  t.same(syncFromRow({ ...row, applied: '7', sent: '9', basis: '11', target: '9', doc: JSON.parse(row.doc) }), { ...record, recent: [] });
  t.same(syncFromRow({ ...row, basis: null, target: null }).basis, undefined, 'an absent basis stays absent');
  const later = syncFromRow(syncToRow({ ...record, later: 'kept' } as SyncRecord)) as SyncRecord & { later?: string };
  t.equal(later.later, 'kept', 'a field the columns do not name is kept in the document');
  t.same(syncFromRow({ doc: JSON.stringify(record) }), record, 'a row of before the columns: its whole record');
});

t.test('SQLite: a file of schema 1 opens, its rows read as before; a restart reads the compact rows', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-perf-syncrow-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'controller.db');
  const old = new Database(file);
  old.exec('CREATE TABLE sync (network TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (network, id)); PRAGMA user_version = 1;');
  old.prepare('INSERT INTO sync (network, id, doc) VALUES (?, ?, ?)').run('n', 'old', JSON.stringify(record));
  old.close();
  const s1 = new SqliteControllerStore(file);
  t.same(s1.load().sync, [{ network: 'n', id: 'old', sync: record }], 'the row of schema 1, as it was');
  s1.putSync('n', 'new', record);
  s1.close();
  const s2 = new SqliteControllerStore(file);
  const byId = new Map(s2.load().sync.map((r) => [r.id, r.sync]));
  t.same(byId.get('new'), { ...record, recent: [] }, 'the compact row');
  s2.close();
  const raw = new Database(file, { readonly: true });
  t.equal(raw.pragma('user_version', { simple: true }), 2);
  raw.close();
});

t.test('a controller restarted on its SQLite file resumes every node without a snapshot', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-perf-syncrow-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'controller.db');
  const c1 = new Controller(new SqliteControllerStore(file), { syncFlushMs: 1000 });
  c1.createNetwork('n');
  c1.setPolicy('n', [{ from: 'a', to: 'a' }]);
  const acked = new Map<string, { v: number; h: string }>();
  for (const id of ['x', 'y', 'z']) c1.join('n', { id, nodeKey: `k-${id}`, tags: ['a'] });
  for (const id of ['x', 'y', 'z']) {
    const d = c1.deltaFor('n', id)!;
    c1.ack('n', id, d.toVersion, d.stateHash!);
    acked.set(id, { v: d.toVersion, h: d.stateHash! });
  }
  c1.flushSync();
  c1.close?.();
  const c2 = new Controller(new SqliteControllerStore(file), { syncFlushMs: 1000 });
  for (const [id, a] of acked) {
    const r = c2.hello('n', id, a.v, a.h);
    t.ok(r.accepted && !r.snapshotPending, `${id} resumes at ${a.v}`);
    t.equal(c2.deltaFor('n', id), null, `${id} is sent nothing`);
  }
  c2.join('n', { id: 'w', nodeKey: 'k-w', tags: ['a'] });
  const d = c2.deltaFor('n', 'x')!;
  t.equal(d.fromVersion, acked.get('x')!.v, 'the next change is a delta from the version acked');
  t.same(
    d.upsertPeers.map((p) => p.id),
    ['w'],
  );
});

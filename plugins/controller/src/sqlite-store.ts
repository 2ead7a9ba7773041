import Database from 'better-sqlite3';
import { dirname } from 'node:path';
import { classified, storeError } from './store-errors.js';
import { privateDbFiles, privateDir, sayTightened } from '@meshp/state-files';
import type { ControllerStore, StoredState } from './store.js';
import { syncFromRow, syncToRow, type LogEntry, type MemberRecord, type NetworkRecord, type StoredSyncRow, type SyncRecord } from '@meshp/core/delta';
import type { TokenRecord } from './tokens.js';
import type { AuditEntry } from '@meshp/core';

/** The audit log's table (issue 28): the hosting's audit store reads it, the change's own transaction writes it (appendAudit). */
export const AUDIT_SCHEMA = `
CREATE TABLE IF NOT EXISTS audit_log (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, actor TEXT NOT NULL, network TEXT NOT NULL,
  method TEXT NOT NULL, node TEXT, summary TEXT NOT NULL, state_version INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS audit_log_at ON audit_log (network, at);
`;

const SCHEMA = `
CREATE TABLE IF NOT EXISTS networks (name TEXT PRIMARY KEY, doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS members (network TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (network, id));
CREATE TABLE IF NOT EXISTS log (network TEXT NOT NULL, version INTEGER NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (network, version));
CREATE TABLE IF NOT EXISTS sync (network TEXT NOT NULL, id TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (network, id));
CREATE TABLE IF NOT EXISTS tokens (token TEXT PRIMARY KEY, doc TEXT NOT NULL);
`;

/**
 * Schema 2 (issue 31, ADR 0044): the sync record's restart fields as columns, the rest a small
 * document (core sync-row.ts). A row of schema 1 keeps its whole record in `doc`, its columns NULL,
 * and is read as it was; its next write is a compact one.
 */
const SYNC_COLUMNS = [
  'applied INTEGER',
  'applied_hash TEXT',
  'sent INTEGER',
  'basis INTEGER',
  'target INTEGER',
  'snapshot_pending INTEGER',
  'expectations TEXT',
];
const SCHEMA_VERSION = 2;

/** The controller's state in one SQLite file (WAL), each record a JSON document. */
export class SqliteControllerStore implements ControllerStore {
  readonly #db: Database.Database;
  readonly #q;
  readonly #path: string;

  /** What was found too wide and tightened when the store was opened (also said on stderr). */
  readonly tightened: string[];

  constructor(path: string) {
    // controller.db holds catalogue contents and credentials' digests: its folder 0700, its files 0600.
    this.#path = path;
    const onDisk = path !== ':memory:' && path !== '';
    const said = onDisk ? [privateDir(dirname(path)), ...privateDbFiles(path)] : [];
    try {
      this.#db = new Database(path);
      this.#db.pragma('journal_mode = WAL');
      this.#db.pragma('synchronous = NORMAL');
      this.#db.exec(SCHEMA);
      const had = new Set((this.#db.prepare("SELECT name FROM pragma_table_info('sync')").all() as { name: string }[]).map((c) => c.name));
      this.#db.transaction(() => {
        for (const c of SYNC_COLUMNS) if (!had.has(c.split(' ')[0]!)) this.#db.exec(`ALTER TABLE sync ADD COLUMN ${c}`);
        this.#db.pragma(`user_version = ${SCHEMA_VERSION}`);
      })();
      if (onDisk) said.push(...privateDbFiles(path));
    } catch (cause) {
      // Sorted by condition: a damaged file is corrupt, a full disk full, anything else unavailable (store-errors.ts).
      throw storeError(cause, path);
    }
    this.tightened = said.filter((l): l is string => l !== null);
    sayTightened(this.tightened);
    const db = this.#db;
    this.#q = {
      putNetwork: db.prepare('INSERT OR REPLACE INTO networks (name, doc) VALUES (?, ?)'),
      putMember: db.prepare('INSERT OR REPLACE INTO members (network, id, doc) VALUES (?, ?, ?)'),
      deleteMember: db.prepare('DELETE FROM members WHERE network = ? AND id = ?'),
      appendLog: db.prepare('INSERT OR REPLACE INTO log (network, version, doc) VALUES (?, ?, ?)'),
      truncateLog: db.prepare('DELETE FROM log WHERE network = ? AND version <= ?'),
      putSync: db.prepare(
        'INSERT OR REPLACE INTO sync (network, id, applied, applied_hash, sent, basis, target, snapshot_pending, expectations, doc) VALUES (@network, @id, @applied, @applied_hash, @sent, @basis, @target, @snapshot_pending, @expectations, @doc)',
      ),
      deleteSync: db.prepare('DELETE FROM sync WHERE network = ? AND id = ?'),
      putToken: db.prepare('INSERT OR REPLACE INTO tokens (token, doc) VALUES (?, ?)'),
      deleteToken: db.prepare('DELETE FROM tokens WHERE token = ?'),
      deleteNetwork: db.prepare('DELETE FROM networks WHERE name = ?'),
      deleteNetworkLog: db.prepare('DELETE FROM log WHERE network = ?'),
    };
  }

  load(): StoredState {
    const all = <T>(sql: string): T[] => classified(this.#path, () => this.#db.prepare(sql).all() as T[]);
    type Row = { network: string; id: string; doc: string };
    type SyncRowRead = StoredSyncRow & { network: string; id: string };
    return {
      networks: all<{ doc: string }>('SELECT doc FROM networks').map((r) => JSON.parse(r.doc) as NetworkRecord),
      members: all<Row>('SELECT network, id, doc FROM members').map((r) => ({ network: r.network, member: JSON.parse(r.doc) as MemberRecord })),
      log: all<{ network: string; doc: string }>('SELECT network, doc FROM log ORDER BY network, version').map((r) => ({
        network: r.network,
        entry: JSON.parse(r.doc) as LogEntry,
      })),
      sync: all<SyncRowRead>('SELECT network, id, applied, applied_hash, sent, basis, target, snapshot_pending, expectations, doc FROM sync').map((r) => ({
        network: r.network,
        id: r.id,
        sync: syncFromRow(r),
      })),
      tokens: all<{ doc: string }>('SELECT doc FROM tokens').map((r) => JSON.parse(r.doc) as TokenRecord),
    };
  }

  /** Every error of SQLite's raised here is sorted by condition (store-errors.ts); one the caller's `fn` throws passes as it is. */
  transaction(fn: () => void): void {
    let own: { e: unknown } | null = null;
    try {
      this.#db.transaction(() => {
        try {
          fn();
        } catch (e) {
          own = { e };
          throw e;
        }
      })();
    } catch (e) {
      if (own && (own as { e: unknown }).e === e) throw e;
      throw storeError(e, this.#path);
    }
  }
  putNetwork(n: NetworkRecord): void {
    this.#run(() => this.#q.putNetwork.run(n.name, JSON.stringify(n)));
  }
  putMember(network: string, m: MemberRecord): void {
    this.#run(() => this.#q.putMember.run(network, m.id, JSON.stringify(m)));
  }
  deleteMember(network: string, id: string): void {
    this.#run(() => this.#q.deleteMember.run(network, id));
  }
  appendLog(network: string, e: LogEntry): void {
    this.#run(() => this.#q.appendLog.run(network, e.version, JSON.stringify(e)));
  }
  truncateLog(network: string, floor: number): void {
    this.#run(() => this.#q.truncateLog.run(network, floor));
  }
  putSync(network: string, id: string, s: SyncRecord): void {
    this.#run(() => this.#q.putSync.run({ network, id, ...syncToRow(s) }));
  }
  deleteSync(network: string, id: string): void {
    this.#run(() => this.#q.deleteSync.run(network, id));
  }
  putToken(t: TokenRecord): void {
    this.#run(() => this.#q.putToken.run(t.token, JSON.stringify(t)));
  }
  deleteToken(token: string): void {
    this.#run(() => this.#q.deleteToken.run(token));
  }
  deleteNetwork(name: string): void {
    this.#run(() => this.#q.deleteNetwork.run(name));
    this.#run(() => this.#q.deleteNetworkLog.run(name));
  }
  /** The change's audit row, in the open transaction (issue 28): the change and its row commit together or not at all. */
  appendAudit(e: AuditEntry, trimBefore: string): void {
    this.#run(() => {
      this.#audit ??= (() => {
        this.#db.exec(AUDIT_SCHEMA);
        return {
          trim: this.#db.prepare('DELETE FROM audit_log WHERE at < ?'),
          insert: this.#db.prepare('INSERT INTO audit_log (at, actor, network, method, node, summary, state_version) VALUES (?, ?, ?, ?, ?, ?, ?)'),
        };
      })();
      this.#audit.trim.run(trimBefore);
      this.#audit.insert.run(e.at, e.actor, e.network, e.method, e.node, e.summary, e.stateVersion);
    });
  }
  #audit: { trim: Database.Statement; insert: Database.Statement } | null = null;
  close(): void {
    this.#db.close();
  }
  #run(fn: () => unknown): void {
    classified(this.#path, fn);
  }
}

/**
 * The audit log in the state folder's SQLite file (issue 28): its own table, its own connection
 * (WAL: it waits on no transaction of the controller's), every admin change one row.
 */
import type Database from 'better-sqlite3';
import type { AuditBook, AuditEntry, AuditQuery } from '@meshp/core';
import { classified } from '../store-errors.js';
import { openSqliteTables } from './sqlite-open.js';
import { AUDIT_SCHEMA } from '../sqlite-store.js';

// The table is also written by the controller's store, in the change's own transaction (sqlite-store.ts appendAudit).
const SCHEMA = AUDIT_SCHEMA;

interface Row {
  at: string;
  actor: string;
  network: string;
  method: string;
  node: string | null;
  summary: string;
  state_version: number;
}

export const auditFromRow = (r: Row): AuditEntry => ({
  at: r.at,
  actor: r.actor,
  network: r.network,
  method: r.method,
  node: r.node,
  summary: r.summary,
  stateVersion: Number(r.state_version),
});

export class SqliteAuditStore implements AuditBook {
  readonly #db: Database.Database;
  readonly #path: string;

  constructor(path: string) {
    this.#path = path;
    this.#db = openSqliteTables(path, SCHEMA);
  }

  appendAudit(e: AuditEntry): void {
    classified(this.#path, () =>
      this.#db
        .prepare('INSERT INTO audit_log (at, actor, network, method, node, summary, state_version) VALUES (?, ?, ?, ?, ?, ?, ?)')
        .run(e.at, e.actor, e.network, e.method, e.node, e.summary, e.stateVersion),
    );
  }

  listAudit(q: AuditQuery): AuditEntry[] {
    const rows = classified(
      this.#path,
      () =>
        this.#db
          .prepare('SELECT * FROM audit_log WHERE network = ? AND at >= ? AND (? IS NULL OR node = ?) ORDER BY at DESC, id DESC LIMIT ?')
          .all(q.network, q.since ?? '', q.node ?? null, q.node ?? null, q.limit) as Row[],
    );
    return rows.map(auditFromRow).reverse();
  }

  trimAudit(before: string): number {
    return classified(this.#path, () => this.#db.prepare('DELETE FROM audit_log WHERE at < ?').run(before).changes);
  }

  /** Every row as stored, in order (for a copy to another store: store-postgres copy.ts). */
  dump(): Record<string, unknown>[] {
    return classified(this.#path, () => this.#db.prepare('SELECT * FROM audit_log ORDER BY id').all() as Record<string, unknown>[]);
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

/**
 * The named admin credentials in the state folder's SQLite file (issue 28): their own table and
 * connection (WAL: it waits on no transaction of the controller's), each credential by the hash of
 * its secret. Read at each admin call: a revocation holds at the next one.
 */
import type Database from 'better-sqlite3';
import type { AdminCredentialBook, AdminCredentialRecord, AdminRole } from '@meshp/core';
import { classified } from '../store-errors.js';
import { openSqliteTables } from './sqlite-open.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS admin_credentials (hash TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL,
  created_at TEXT NOT NULL, revoked_at TEXT);
`;

export interface AdminCredentialRow {
  name: string;
  role: string;
  created_at: string;
  revoked_at: string | null;
}

export const adminFromRow = (r: AdminCredentialRow): AdminCredentialRecord => ({
  name: r.name,
  role: r.role as AdminRole,
  createdAt: r.created_at,
  revokedAt: r.revoked_at,
});

export class SqliteAdminCredentialStore implements AdminCredentialBook {
  readonly #db: Database.Database;
  readonly #path: string;

  constructor(path: string) {
    this.#path = path;
    this.#db = openSqliteTables(path, SCHEMA);
  }

  #run<T>(fn: (db: Database.Database) => T): T {
    return classified(this.#path, () => fn(this.#db));
  }

  addAdmin(hash: string, r: AdminCredentialRecord): boolean {
    return this.#run(
      (db) =>
        db
          .prepare('INSERT INTO admin_credentials (hash, name, role, created_at) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING')
          .run(hash, r.name, r.role, r.createdAt).changes === 1,
    );
  }

  adminBySecret(hash: string): AdminCredentialRecord | null {
    const r = this.#run((db) => db.prepare('SELECT * FROM admin_credentials WHERE hash = ?').get(hash) as AdminCredentialRow | undefined);
    return r ? adminFromRow(r) : null;
  }

  listAdmins(): AdminCredentialRecord[] {
    return this.#run((db) => db.prepare('SELECT * FROM admin_credentials ORDER BY name').all() as AdminCredentialRow[]).map(adminFromRow);
  }

  revokeAdmin(name: string, at: string): AdminCredentialRecord | null {
    return this.#run((db) => {
      db.prepare('UPDATE admin_credentials SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL').run(at, name);
      const r = db.prepare('SELECT * FROM admin_credentials WHERE name = ?').get(name) as AdminCredentialRow | undefined;
      return r ? adminFromRow(r) : null;
    });
  }

  /** Every row as stored, in order (for a copy to another store: store-postgres copy.ts). */
  dump(): Record<string, unknown>[] {
    return this.#run((db) => db.prepare('SELECT * FROM admin_credentials ORDER BY name').all() as Record<string, unknown>[]);
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

/**
 * The named admin credentials in PostgreSQL (issue 28; migration 6): one table every replica reads
 * at each admin call, nothing cached, so a credential revoked through one replica is refused by the
 * other at its next call. On the controller's thread without waiting (the …Async methods: issue 24).
 */
import type { AdminCredentialBook, AdminCredentialRecord, AdminRole } from '@meshp/core';
import type { Stmt, SyncPg } from './sync-pg.js';

interface Row {
  name: string;
  role: string;
  created_at: string;
  revoked_at: string | null;
}

const record = (r: Row): AdminCredentialRecord => ({ name: r.name, role: r.role as AdminRole, createdAt: r.created_at, revokedAt: r.revoked_at });

const addStmt = (hash: string, r: AdminCredentialRecord): Stmt => ({
  text: 'INSERT INTO admin_credentials (hash, name, role, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
  values: [hash, r.name, r.role, r.createdAt],
});
const BY_HASH = 'SELECT * FROM admin_credentials WHERE hash = $1';
const LIST = 'SELECT * FROM admin_credentials ORDER BY name';
const revokeStmts = (name: string, at: string): Stmt[] => [
  { text: 'UPDATE admin_credentials SET revoked_at = $1 WHERE name = $2 AND revoked_at IS NULL', values: [at, name] },
  { text: 'SELECT * FROM admin_credentials WHERE name = $1', values: [name] },
];

export class PostgresAdminCredentialStore implements AdminCredentialBook {
  readonly #db: SyncPg;

  constructor(db: SyncPg) {
    this.#db = db;
  }

  addAdmin(hash: string, r: AdminCredentialRecord): boolean {
    return this.#db.run([addStmt(hash, r)])[0]!.rowCount === 1;
  }

  async addAdminAsync(hash: string, r: AdminCredentialRecord): Promise<boolean> {
    return (await this.#db.runAsync([addStmt(hash, r)]))[0]!.rowCount === 1;
  }

  adminBySecret(hash: string): AdminCredentialRecord | null {
    const r = this.#db.rows<Row>(BY_HASH, [hash])[0];
    return r ? record(r) : null;
  }

  async adminBySecretAsync(hash: string): Promise<AdminCredentialRecord | null> {
    const r = (await this.#db.runAsync([{ text: BY_HASH, values: [hash] }]))[0]!.rows[0] as unknown as Row | undefined;
    return r ? record(r) : null;
  }

  listAdmins(): AdminCredentialRecord[] {
    return this.#db.rows<Row>(LIST).map(record);
  }

  async listAdminsAsync(): Promise<AdminCredentialRecord[]> {
    return ((await this.#db.runAsync([{ text: LIST, values: [] }]))[0]!.rows as unknown as Row[]).map(record);
  }

  revokeAdmin(name: string, at: string): AdminCredentialRecord | null {
    const r = this.#db.run(revokeStmts(name, at))[1]!.rows[0] as unknown as Row | undefined;
    return r ? record(r) : null;
  }

  async revokeAdminAsync(name: string, at: string): Promise<AdminCredentialRecord | null> {
    const r = (await this.#db.runAsync(revokeStmts(name, at), true))[1]!.rows[0] as unknown as Row | undefined;
    return r ? record(r) : null;
  }

  /** The connection is the controller store's: closed with it. */
  close(): void {}
}

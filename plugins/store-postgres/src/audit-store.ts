/**
 * The audit log in PostgreSQL (issue 28): one table every replica appends to and reads, so two
 * replicas keep one log (migration 5). Written and read through at each call, nothing cached; on
 * the controller's thread without waiting (appendAuditAsync, listAuditAsync: issue 24).
 */
import type { AuditBook, AuditEntry, AuditQuery } from '@meshp/core';
import type { SyncPg } from './sync-pg.js';

interface Row {
  at: string;
  actor: string;
  network: string;
  method: string;
  node: string | null;
  summary: string;
  state_version: string | number;
}

const insert = (e: AuditEntry) => ({
  text: 'INSERT INTO audit_log (at, actor, network, method, node, summary, state_version) VALUES ($1, $2, $3, $4, $5, $6, $7)',
  values: [e.at, e.actor, e.network, e.method, e.node, e.summary, e.stateVersion],
});

/** The newest `limit` entries of the query, asked newest first. */
const list = (q: AuditQuery) => ({
  text: 'SELECT * FROM audit_log WHERE network = $1 AND at >= $2 AND ($3::text IS NULL OR node = $3) ORDER BY at DESC, id DESC LIMIT $4',
  values: [q.network, q.since ?? '', q.node ?? null, q.limit],
});

/** Oldest first, as the log reads. */
const entries = (rows: Row[]): AuditEntry[] =>
  rows
    .map((r) => ({ at: r.at, actor: r.actor, network: r.network, method: r.method, node: r.node, summary: r.summary, stateVersion: Number(r.state_version) }))
    .reverse();

export class PostgresAuditStore implements AuditBook {
  readonly #db: SyncPg;

  constructor(db: SyncPg) {
    this.#db = db;
  }

  appendAudit(e: AuditEntry): void {
    this.#db.run([insert(e)]);
  }

  async appendAuditAsync(e: AuditEntry, trimBefore: string): Promise<void> {
    await this.#db.runAsync([{ text: 'DELETE FROM audit_log WHERE at < $1', values: [trimBefore] }, insert(e)], true);
  }

  listAudit(q: AuditQuery): AuditEntry[] {
    const { text, values } = list(q);
    return entries(this.#db.rows<Row>(text, values));
  }

  async listAuditAsync(q: AuditQuery): Promise<AuditEntry[]> {
    const [r] = await this.#db.runAsync([list(q)]);
    return entries(r!.rows as unknown as Row[]);
  }

  trimAudit(before: string): number {
    return this.#db.run([{ text: 'DELETE FROM audit_log WHERE at < $1', values: [before] }])[0]!.rowCount ?? 0;
  }

  /** The connection is the controller store's: closed with it. */
  close(): void {}
}

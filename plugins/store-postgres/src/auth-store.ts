/**
 * The hosting's tokens and credentials (the SQLite AuthStore's tables, in PostgreSQL), read and
 * written through at each call: every replica sees a credential another issued, a token another
 * made, a key another revoked, with nothing cached here.
 */
import type { ReportMessage } from '@meshp/core';
import type { AuthBook, EnrolFacts, HelloFacts, StoredToken, TokenInfo, TokenRevocation, TokenRow } from '@meshp/core';
import { hashSecret, idRange, newestFirst, revokeRow, tokenFromRow } from '@meshp/core/store';
import { isMeshpError } from '@meshp/core';
import type { SyncPg } from './sync-pg.js';

const MARK_USED = 'UPDATE hosting_tokens SET used_at = $1, used_by = $2, used_key = $3 WHERE hash = $4 AND used_at IS NULL AND revoked_at IS NULL';
const CONFIRM = 'UPDATE hosting_tokens SET confirmed_at = $1 WHERE network = $2 AND used_by = $3 AND confirmed_at IS NULL AND used_at IS NOT NULL';

export class PostgresAuthStore implements AuthBook {
  readonly #db: SyncPg;
  /** Whether `close` also closes the connection (shared with the controller's store: no). */
  readonly #owns: boolean;
  /** Each node's report as last written or read here (for reads while the database is down). */
  readonly #lastReports = new Map<string, ReportMessage>();

  constructor(db: SyncPg, owns = false) {
    this.#db = db;
    this.#owns = owns;
  }

  putToken(secret: string, t: Omit<StoredToken, 'usedAt' | 'usedBy' | 'usedKey' | 'confirmedAt' | 'revokedAt'>): void {
    this.#db.rows('INSERT INTO hosting_tokens (hash, network, mode, tags, fingerprint, expires_at, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      hashSecret(secret),
      t.network,
      t.mode,
      JSON.stringify(t.tags),
      t.fingerprint,
      t.expiresAt,
      t.createdAt ?? null,
    ]);
  }

  getToken(secret: string): StoredToken | null {
    const r = this.#db.rows<TokenRow>('SELECT * FROM hosting_tokens WHERE hash = $1', [hashSecret(secret)])[0];
    if (!r) return null;
    const { id: _id, ...t } = tokenFromRow(r);
    return t;
  }

  /** Single use across replicas: the row's update is the arbiter, true only for the first caller (never for a revoked token). */
  markUsed(secret: string, by: string, at: string, nodeKey: string): boolean {
    const [r] = this.#db.run([
      {
        text: MARK_USED,
        values: [at, by, nodeKey, hashSecret(secret)],
      },
    ]);
    return r!.rowCount === 1;
  }

  listTokens(network: string): TokenInfo[] {
    return this.#db.rows<TokenRow>('SELECT * FROM hosting_tokens WHERE network = $1', [network]).map(tokenFromRow).sort(newestFirst);
  }

  /** As the SQLite store (token-rows.ts revokeRow): the row's update decides against an enrolment on another replica. */
  revokeToken(network: string, id: string, at: string): TokenRevocation {
    const [lo, hi] = idRange(id);
    const rows = this.#db.rows<TokenRow>('SELECT * FROM hosting_tokens WHERE network = $1 AND hash >= $2 AND hash < $3 LIMIT 2', [network, lo, hi]);
    return revokeRow(
      rows,
      network,
      id,
      (hash) =>
        this.#db.run([{ text: 'UPDATE hosting_tokens SET revoked_at = $1 WHERE hash = $2 AND used_at IS NULL AND revoked_at IS NULL', values: [at, hash] }])[0]!
          .rowCount === 1,
      (hash) => this.#db.rows<TokenRow>('SELECT * FROM hosting_tokens WHERE hash = $1', [hash])[0],
    );
  }

  /** One indexed update per hello: a count of tokens pending kept in memory would not see the other replicas'. */
  confirm(network: string, node: string, at: string): void {
    this.#db.rows(CONFIRM, [at, network, node]);
  }

  pendingAdded(): void {}

  putCredential(credential: string, network: string, node: string): void {
    this.#tx([
      ['DELETE FROM hosting_credentials WHERE network = $1 AND node = $2', [network, node]],
      ['INSERT INTO hosting_credentials (hash, network, node) VALUES ($1, $2, $3)', [hashSecret(credential), network, node]],
    ]);
  }

  nodeOf(credential: string): { network: string; node: string } | null {
    return (
      this.#db.rows<{ network: string; node: string }>('SELECT network, node FROM hosting_credentials WHERE hash = $1', [hashSecret(credential)])[0] ?? null
    );
  }

  revoke(network: string, node: string, nodeKey: string, at: string): void {
    this.#tx([
      ['DELETE FROM hosting_credentials WHERE network = $1 AND node = $2', [network, node]],
      ['DELETE FROM hosting_reports WHERE network = $1 AND node = $2', [network, node]],
      // One IN over a UNION (as the SQLite store): the index on used tokens by node answers it.
      [
        'DELETE FROM hosting_tokens WHERE network = $1 AND used_at IS NOT NULL AND used_by IN (SELECT $2 UNION SELECT old FROM hosting_renames WHERE network = $1 AND new = $2)',
        [network, node],
      ],
      ['DELETE FROM hosting_renames WHERE network = $1 AND new = $2', [network, node]],
      [
        'INSERT INTO hosting_revoked_keys (network, node_key, node, at) VALUES ($1, $2, $3, $4) ON CONFLICT (network, node_key) DO UPDATE SET node = EXCLUDED.node, at = EXCLUDED.at',
        [network, nodeKey, node, at],
      ],
    ]);
    this.#lastReports.delete(`${network}\u0000${node}`);
  }

  revokedKeysOf(node: string): { network: string; nodeKey: string; at: string }[] {
    return this.#db.rows<{ network: string; nodeKey: string; at: string }>(
      'SELECT network, node_key AS "nodeKey", at FROM hosting_revoked_keys WHERE node = $1',
      [node],
    );
  }

  revokedKey(network: string, nodeKey: string): { node: string; at: string } | null {
    return (
      this.#db.rows<{ node: string; at: string }>('SELECT node, at FROM hosting_revoked_keys WHERE network = $1 AND node_key = $2', [network, nodeKey])[0] ??
      null
    );
  }

  rename(network: string, from: string, to: string): void {
    this.#tx([
      ['UPDATE hosting_credentials SET node = $1 WHERE network = $2 AND node = $3', [to, network, from]],
      ['UPDATE hosting_reports SET node = $1 WHERE network = $2 AND node = $3', [to, network, from]],
      ['UPDATE hosting_renames SET new = $1 WHERE network = $2 AND new = $3', [to, network, from]],
      ['DELETE FROM hosting_renames WHERE network = $1 AND old = $2', [network, to]],
      ['INSERT INTO hosting_renames (network, old, new) VALUES ($1, $2, $3) ON CONFLICT (network, old) DO UPDATE SET new = EXCLUDED.new', [network, from, to]],
    ]);
    const moved = this.#lastReports.get(`${network}\u0000${from}`);
    this.#lastReports.delete(`${network}\u0000${from}`);
    if (moved) this.#lastReports.set(`${network}\u0000${to}`, moved);
  }

  renamedTo(network: string, old: string): string | null {
    return this.#db.rows<{ new: string }>('SELECT new FROM hosting_renames WHERE network = $1 AND old = $2', [network, old])[0]?.new ?? null;
  }

  putReport(network: string, node: string, report: ReportMessage): void {
    this.#db.rows('INSERT INTO hosting_reports (network, node, doc) VALUES ($1, $2, $3) ON CONFLICT (network, node) DO UPDATE SET doc = EXCLUDED.doc', [
      network,
      node,
      JSON.stringify(report),
    ]);
    this.#lastReports.set(`${network}\u0000${node}`, report);
  }

  /** The same, without the event loop waiting: kept in memory at once, written when the database answers. */
  async putReportAsync(network: string, node: string, report: ReportMessage): Promise<void> {
    this.#lastReports.set(`${network}\u0000${node}`, report);
    await this.#db.runAsync([
      {
        text: 'INSERT INTO hosting_reports (network, node, doc) VALUES ($1, $2, $3) ON CONFLICT (network, node) DO UPDATE SET doc = EXCLUDED.doc',
        values: [network, node, JSON.stringify(report)],
      },
    ]);
  }

  // ---- without the event loop waiting (issue 24): a hello or an enrolment during a stall holds up no other stream ----

  /** The credential's owner, the name the hello's node carries now in the owner's network, the keys revoked under it: one batch. */
  async helloFactsAsync(credential: string, node: string): Promise<HelloFacts> {
    const hash = hashSecret(credential);
    const [owner, renamed, revoked] = await this.#db.runAsync([
      { text: 'SELECT network, node FROM hosting_credentials WHERE hash = $1', values: [hash] },
      {
        text: 'SELECT r.new FROM hosting_renames r JOIN hosting_credentials c ON c.network = r.network WHERE c.hash = $1 AND r.old = $2',
        values: [hash, node],
      },
      { text: 'SELECT network, node_key AS "nodeKey", at FROM hosting_revoked_keys WHERE node = $1', values: [node] },
    ]);
    return {
      owner: (owner!.rows[0] as HelloFacts['owner'] | undefined) ?? null,
      renamedTo: (renamed!.rows[0] as { new: string } | undefined)?.new ?? null,
      revokedKeys: revoked!.rows as HelloFacts['revokedKeys'],
    };
  }

  async confirmAsync(network: string, node: string, at: string): Promise<void> {
    await this.#db.runAsync([{ text: CONFIRM, values: [at, network, node] }]);
  }

  /** The token and, in its network, who held the node key when it was revoked: one batch. */
  async enrolFactsAsync(secret: string, nodeKey: string): Promise<EnrolFacts> {
    const hash = hashSecret(secret);
    const [token, revoked] = await this.#db.runAsync([
      { text: 'SELECT * FROM hosting_tokens WHERE hash = $1', values: [hash] },
      {
        text: 'SELECT k.node, k.at FROM hosting_revoked_keys k JOIN hosting_tokens t ON t.network = k.network WHERE t.hash = $1 AND k.node_key = $2',
        values: [hash, nodeKey],
      },
    ]);
    const row = token!.rows[0] as unknown as TokenRow | undefined;
    let stored: StoredToken | null = null;
    if (row) {
      const { id: _id, ...t } = tokenFromRow(row);
      stored = t;
    }
    return { token: stored, revoked: (revoked!.rows[0] as EnrolFacts['revoked'] | undefined) ?? null };
  }

  async markUsedAsync(secret: string, by: string, at: string, nodeKey: string): Promise<boolean> {
    const [r] = await this.#db.runAsync([{ text: MARK_USED, values: [at, by, nodeKey, hashSecret(secret)] }]);
    return r!.rowCount === 1;
  }

  async putCredentialAsync(credential: string, network: string, node: string): Promise<void> {
    await this.#db.runAsync(
      [
        { text: 'DELETE FROM hosting_credentials WHERE network = $1 AND node = $2', values: [network, node] },
        { text: 'INSERT INTO hosting_credentials (hash, network, node) VALUES ($1, $2, $3)', values: [hashSecret(credential), network, node] },
      ],
      true,
    );
  }

  /**
   * The node's last report as written (by any replica). While the database is down (or found down
   * by this read), the last one this replica wrote or read: a node list answers from memory.
   */
  report(network: string, node: string): ReportMessage | null {
    const key = `${network}\u0000${node}`;
    if (!this.#db.health().up) return this.#lastReports.get(key) ?? null;
    let r: { doc: string } | undefined;
    try {
      r = this.#db.rows<{ doc: string }>('SELECT doc FROM hosting_reports WHERE network = $1 AND node = $2', [network, node])[0];
    } catch (e) {
      if (isMeshpError(e, 'MESHP_STORE_UNAVAILABLE')) return this.#lastReports.get(key) ?? null;
      throw e;
    }
    const report = r ? (JSON.parse(r.doc) as ReportMessage) : null;
    if (report) this.#lastReports.set(key, report);
    else this.#lastReports.delete(key);
    return report;
  }

  close(): void {
    if (this.#owns) this.#db.close();
  }

  #tx(stmts: [string, unknown[]][]): void {
    try {
      this.#db.run([{ text: 'BEGIN' }, ...stmts.map(([text, values]) => ({ text, values })), { text: 'COMMIT' }]);
    } catch (e) {
      try {
        this.#db.run([{ text: 'ROLLBACK' }]);
      } catch {
        // the connection went with the transaction
      }
      throw e;
    }
  }
}

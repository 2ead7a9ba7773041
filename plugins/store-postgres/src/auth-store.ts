/**
 * The hosting's tokens and credentials (the SQLite AuthStore's tables, in PostgreSQL), read and
 * written through at each call: every replica sees a credential another issued, a token another
 * made, a key another revoked. Only the nodes' last reports are kept here, read in before an admin
 * call shows them (loadReportsAsync). The controller's thread asks without waiting (the …Async
 * methods: issue 24); the synchronous ones are the AuthBook every store keeps.
 */
import type { ReportMessage } from '@meshp/core';
import type { AuthBook, EnrolFacts, HelloFacts, StoredToken, TokenInfo, TokenRevocation, TokenRow, TokenUse } from '@meshp/core';
import { hashSecret, idRange, newestFirst, revokeRow, revokeRowAsync, tokenFromRow } from '@meshp/core/store';
import type { Stmt, SyncPg } from './sync-pg.js';

type NewToken = Omit<StoredToken, 'usedAt' | 'usedBy' | 'usedKey' | 'confirmedAt' | 'revokedAt'>;

const TOKEN_BY_HASH = 'SELECT * FROM hosting_tokens WHERE hash = $1';

const putTokenStmt = (secret: string, t: NewToken): Stmt => ({
  text: 'INSERT INTO hosting_tokens (hash, network, mode, tags, fingerprint, expires_at, created_at, max_uses, ephemeral_seconds) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)',
  values: [
    hashSecret(secret),
    t.network,
    t.mode,
    JSON.stringify(t.tags),
    t.fingerprint,
    t.expiresAt,
    t.createdAt ?? null,
    t.maxUses ?? null,
    t.ephemeralSeconds ?? null,
  ],
});

/**
 * A reusable token's use (issue 28), one statement: the count's conditional update takes the row's
 * lock, so a replica enrolling with the same token at the same moment waits for this one's commit
 * and then finds the count as it left it (no double use); the use is written only when it took.
 */
const takeUseStmt = (secret: string, by: string, at: string, nodeKey: string): Stmt => ({
  text: `WITH t AS (UPDATE hosting_tokens SET uses = uses + 1 WHERE hash = $1 AND max_uses IS NOT NULL AND uses < max_uses AND revoked_at IS NULL RETURNING hash, network)
INSERT INTO hosting_token_uses (hash, network, node, node_key, used_at) SELECT hash, network, $2, $3, $4 FROM t`,
  values: [hashSecret(secret), by, nodeKey, at],
});

const TOKEN_USE =
  'SELECT node, node_key AS "nodeKey", used_at AS "usedAt", confirmed_at AS "confirmedAt" FROM hosting_token_uses WHERE hash = $1 AND node_key = $2';

/** The rows an id names (two at most: enough to refuse an id that names several). */
const byIdStmt = (network: string, id: string): Stmt => {
  const [lo, hi] = idRange(id);
  return { text: 'SELECT * FROM hosting_tokens WHERE network = $1 AND hash >= $2 AND hash < $3 LIMIT 2', values: [network, lo, hi] };
};

const revokeTokenStmt = (at: string, hash: string): Stmt => ({
  text: 'UPDATE hosting_tokens SET revoked_at = $1 WHERE hash = $2 AND used_at IS NULL AND revoked_at IS NULL',
  values: [at, hash],
});

const credentialStmts = (credential: string, network: string, node: string): Stmt[] => [
  { text: 'DELETE FROM hosting_credentials WHERE network = $1 AND node = $2', values: [network, node] },
  { text: 'INSERT INTO hosting_credentials (hash, network, node) VALUES ($1, $2, $3)', values: [hashSecret(credential), network, node] },
];

const revokeStmts = (network: string, node: string, nodeKey: string, at: string): Stmt[] => [
  { text: 'DELETE FROM hosting_credentials WHERE network = $1 AND node = $2', values: [network, node] },
  { text: 'DELETE FROM hosting_reports WHERE network = $1 AND node = $2', values: [network, node] },
  // One IN over a UNION (as the SQLite store): the index on used tokens by node answers it.
  {
    text: 'DELETE FROM hosting_tokens WHERE network = $1 AND used_at IS NOT NULL AND used_by IN (SELECT $2 UNION SELECT old FROM hosting_renames WHERE network = $1 AND new = $2)',
    values: [network, node],
  },
  { text: 'DELETE FROM hosting_renames WHERE network = $1 AND new = $2', values: [network, node] },
  // A reusable token's use by it, and when it was last seen (an ephemeral node), go too; the token's count stays.
  { text: 'DELETE FROM hosting_token_uses WHERE network = $1 AND node = $2', values: [network, node] },
  { text: 'DELETE FROM hosting_seen WHERE network = $1 AND node = $2', values: [network, node] },
  {
    text: 'INSERT INTO hosting_revoked_keys (network, node_key, node, at) VALUES ($1, $2, $3, $4) ON CONFLICT (network, node_key) DO UPDATE SET node = EXCLUDED.node, at = EXCLUDED.at',
    values: [network, nodeKey, node, at],
  },
];

const renameStmts = (network: string, from: string, to: string): Stmt[] => [
  { text: 'UPDATE hosting_credentials SET node = $1 WHERE network = $2 AND node = $3', values: [to, network, from] },
  { text: 'UPDATE hosting_reports SET node = $1 WHERE network = $2 AND node = $3', values: [to, network, from] },
  { text: 'UPDATE hosting_token_uses SET node = $1 WHERE network = $2 AND node = $3', values: [to, network, from] },
  { text: 'UPDATE hosting_seen SET node = $1 WHERE network = $2 AND node = $3', values: [to, network, from] },
  { text: 'UPDATE hosting_renames SET new = $1 WHERE network = $2 AND new = $3', values: [to, network, from] },
  { text: 'DELETE FROM hosting_renames WHERE network = $1 AND old = $2', values: [network, to] },
  {
    text: 'INSERT INTO hosting_renames (network, old, new) VALUES ($1, $2, $3) ON CONFLICT (network, old) DO UPDATE SET new = EXCLUDED.new',
    values: [network, from, to],
  },
];

const MARK_USED = 'UPDATE hosting_tokens SET used_at = $1, used_by = $2, used_key = $3 WHERE hash = $4 AND used_at IS NULL AND revoked_at IS NULL';
const CONFIRM = 'UPDATE hosting_tokens SET confirmed_at = $1 WHERE network = $2 AND used_by = $3 AND confirmed_at IS NULL AND used_at IS NOT NULL';
const CONFIRM_USE = 'UPDATE hosting_token_uses SET confirmed_at = $1 WHERE network = $2 AND node = $3 AND confirmed_at IS NULL';

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

  putToken(secret: string, t: NewToken): void {
    this.#db.run([putTokenStmt(secret, t)]);
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

  takeUse(secret: string, by: string, at: string, nodeKey: string): boolean {
    return this.#db.run([takeUseStmt(secret, by, at, nodeKey)])[0]!.rowCount === 1;
  }

  async takeUseAsync(secret: string, by: string, at: string, nodeKey: string): Promise<boolean> {
    return (await this.#db.runAsync([takeUseStmt(secret, by, at, nodeKey)]))[0]!.rowCount === 1;
  }

  tokenUse(secret: string, nodeKey: string): TokenUse | null {
    return this.#db.rows<TokenUse>(TOKEN_USE, [hashSecret(secret), nodeKey])[0] ?? null;
  }

  /** The ephemeral nodes whose streams this replica holds, seen now (issue 28): another replica reaps none of them. */
  async markSeenAsync(network: string, nodes: string[], at: string): Promise<void> {
    if (nodes.length === 0) return;
    await this.#db.runAsync([
      {
        text: 'INSERT INTO hosting_seen (network, node, seen_at) SELECT $1, n, $3 FROM unnest($2::text[]) AS n ON CONFLICT (network, node) DO UPDATE SET seen_at = EXCLUDED.seen_at',
        values: [network, nodes, at],
      },
    ]);
  }

  async lastSeenAsync(network: string): Promise<Map<string, string>> {
    const [r] = await this.#db.runAsync([{ text: 'SELECT node, seen_at FROM hosting_seen WHERE network = $1', values: [network] }]);
    return new Map((r!.rows as { node: string; seen_at: string }[]).map((x) => [x.node, x.seen_at]));
  }

  listTokens(network: string): TokenInfo[] {
    return this.#db.rows<TokenRow>('SELECT * FROM hosting_tokens WHERE network = $1', [network]).map(tokenFromRow).sort(newestFirst);
  }

  /** As the SQLite store (token-rows.ts revokeRow): the row's update decides against an enrolment on another replica. */
  revokeToken(network: string, id: string, at: string): TokenRevocation {
    const rows = this.#db.run([byIdStmt(network, id)])[0]!.rows as unknown as TokenRow[];
    return revokeRow(
      rows,
      network,
      id,
      (hash) => this.#db.run([revokeTokenStmt(at, hash)])[0]!.rowCount === 1,
      (hash) => this.#db.rows<TokenRow>(TOKEN_BY_HASH, [hash])[0],
    );
  }

  /** One indexed update per hello: a count of tokens pending kept in memory would not see the other replicas'. */
  confirm(network: string, node: string, at: string): void {
    this.#db.run([
      { text: CONFIRM, values: [at, network, node] },
      { text: CONFIRM_USE, values: [at, network, node] },
    ]);
  }

  pendingAdded(): void {}

  putCredential(credential: string, network: string, node: string): void {
    this.#tx(credentialStmts(credential, network, node));
  }

  nodeOf(credential: string): { network: string; node: string } | null {
    return (
      this.#db.rows<{ network: string; node: string }>('SELECT network, node FROM hosting_credentials WHERE hash = $1', [hashSecret(credential)])[0] ?? null
    );
  }

  revoke(network: string, node: string, nodeKey: string, at: string): void {
    this.#tx(revokeStmts(network, node, nodeKey, at));
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
    this.#tx(renameStmts(network, from, to));
    this.#renamed(network, from, to);
  }

  #renamed(network: string, from: string, to: string): void {
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
    await this.#db.runAsync([
      { text: CONFIRM, values: [at, network, node] },
      { text: CONFIRM_USE, values: [at, network, node] },
    ]);
  }

  /** The token and, in its network, who held the node key when it was revoked: one batch. */
  async enrolFactsAsync(secret: string, nodeKey: string): Promise<EnrolFacts> {
    const hash = hashSecret(secret);
    const [token, revoked, use] = await this.#db.runAsync([
      { text: 'SELECT * FROM hosting_tokens WHERE hash = $1', values: [hash] },
      {
        text: 'SELECT k.node, k.at FROM hosting_revoked_keys k JOIN hosting_tokens t ON t.network = k.network WHERE t.hash = $1 AND k.node_key = $2',
        values: [hash, nodeKey],
      },
      { text: TOKEN_USE, values: [hash, nodeKey] },
    ]);
    const row = token!.rows[0] as unknown as TokenRow | undefined;
    let stored: StoredToken | null = null;
    if (row) {
      const { id: _id, ...t } = tokenFromRow(row);
      stored = t;
    }
    return {
      token: stored,
      revoked: (revoked!.rows[0] as EnrolFacts['revoked'] | undefined) ?? null,
      use: (use!.rows[0] as unknown as TokenUse | undefined) ?? null,
    };
  }

  async markUsedAsync(secret: string, by: string, at: string, nodeKey: string): Promise<boolean> {
    const [r] = await this.#db.runAsync([{ text: MARK_USED, values: [at, by, nodeKey, hashSecret(secret)] }]);
    return r!.rowCount === 1;
  }

  async putCredentialAsync(credential: string, network: string, node: string): Promise<void> {
    await this.#db.runAsync(credentialStmts(credential, network, node), true);
  }

  async putTokenAsync(secret: string, t: NewToken): Promise<void> {
    await this.#db.runAsync([putTokenStmt(secret, t)]);
  }

  async listTokensAsync(network: string): Promise<TokenInfo[]> {
    const [r] = await this.#db.runAsync([{ text: 'SELECT * FROM hosting_tokens WHERE network = $1', values: [network] }]);
    return (r!.rows as unknown as TokenRow[]).map(tokenFromRow).sort(newestFirst);
  }

  async revokeTokenAsync(network: string, id: string, at: string): Promise<TokenRevocation> {
    const [r] = await this.#db.runAsync([byIdStmt(network, id)]);
    return revokeRowAsync(
      r!.rows as unknown as TokenRow[],
      network,
      id,
      async (hash) => (await this.#db.runAsync([revokeTokenStmt(at, hash)]))[0]!.rowCount === 1,
      async (hash) => (await this.#db.runAsync([{ text: TOKEN_BY_HASH, values: [hash] }]))[0]!.rows[0] as unknown as TokenRow | undefined,
    );
  }

  async revokeAsync(network: string, node: string, nodeKey: string, at: string): Promise<void> {
    await this.#db.runAsync(revokeStmts(network, node, nodeKey, at), true);
    this.#lastReports.delete(`${network}\u0000${node}`);
  }

  async renameAsync(network: string, from: string, to: string): Promise<void> {
    await this.#db.runAsync(renameStmts(network, from, to), true);
    this.#renamed(network, from, to);
  }

  /** The reports read into memory in one batch; `report` answers from memory on a store read without waiting. */
  async loadReportsAsync(network: string, nodes: string[] | null): Promise<void> {
    const [r] = await this.#db.runAsync([
      nodes
        ? { text: 'SELECT node, doc FROM hosting_reports WHERE network = $1 AND node = ANY($2)', values: [network, nodes] }
        : { text: 'SELECT node, doc FROM hosting_reports WHERE network = $1', values: [network] },
    ]);
    const found = new Set<string>();
    for (const row of r!.rows as { node: string; doc: string }[]) {
      found.add(row.node);
      this.#lastReports.set(`${network}\u0000${row.node}`, JSON.parse(row.doc) as ReportMessage);
    }
    // A node whose report is gone (removed, by any replica) has none here either.
    const asked = nodes ?? [...this.#lastReports.keys()].filter((k) => k.startsWith(`${network}\u0000`)).map((k) => k.slice(network.length + 1));
    for (const n of asked) if (!found.has(n)) this.#lastReports.delete(`${network}\u0000${n}`);
  }

  /**
   * The node's last report as this replica last wrote or read it: the admin calls that show reports
   * read them first, without waiting (`loadReportsAsync`), so a report another replica wrote is
   * there; while the database is down, the last known.
   */
  report(network: string, node: string): ReportMessage | null {
    return this.#lastReports.get(`${network}\u0000${node}`) ?? null;
  }

  close(): void {
    if (this.#owns) this.#db.close();
  }

  #tx(stmts: Stmt[]): void {
    try {
      this.#db.run([{ text: 'BEGIN' }, ...stmts, { text: 'COMMIT' }]);
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

/**
 * What the hosting keeps beside the controller's state, in the same SQLite file (own tables):
 * enrolment tokens by the hash of their secret (the secret itself is never stored), and each
 * node's credential by its hash. Its errors after opening are sorted by the hosting's guard
 * (auth-guard.ts), through the same classifier as the controller's store.
 */
import Database from 'better-sqlite3';
import { type AuthBook, type ReportMessage, type StoredToken, type TokenInfo, type TokenRevocation, type TokenRow, type TokenUse } from '@meshp/core';
import { HOSTING_TABLES, hashSecret, idRange, newestFirst, revokeRow, tokenFromRow } from '@meshp/core/store';
import { classified, storeError } from '../store-errors.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS hosting_tokens (hash TEXT PRIMARY KEY, network TEXT NOT NULL, mode TEXT NOT NULL,
  tags TEXT NOT NULL, fingerprint TEXT NOT NULL, expires_at TEXT NOT NULL, used_at TEXT, used_by TEXT);
CREATE TABLE IF NOT EXISTS hosting_credentials (hash TEXT PRIMARY KEY, network TEXT NOT NULL, node TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS hosting_credentials_node ON hosting_credentials (network, node);
CREATE TABLE IF NOT EXISTS hosting_reports (network TEXT NOT NULL, node TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (network, node));
CREATE TABLE IF NOT EXISTS hosting_revoked_keys (network TEXT NOT NULL, node_key TEXT NOT NULL, node TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (network, node_key));
CREATE TABLE IF NOT EXISTS hosting_renames (network TEXT NOT NULL, old TEXT NOT NULL, new TEXT NOT NULL, PRIMARY KEY (network, old));
CREATE TABLE IF NOT EXISTS hosting_token_uses (hash TEXT NOT NULL, network TEXT NOT NULL, node TEXT NOT NULL, node_key TEXT NOT NULL,
  used_at TEXT NOT NULL, confirmed_at TEXT, PRIMARY KEY (hash, node_key));
CREATE INDEX IF NOT EXISTS hosting_token_uses_node ON hosting_token_uses (network, node);
`;

// What the hosting needs of this store is core's AuthBook (core/src/contract/store.ts), also kept by store-postgres.
export type { AuthBook, StoredToken } from '@meshp/core';
export { hashSecret, HOSTING_TABLES } from '@meshp/core/store';

/** A prepared statement's runs, each sorted by condition (store-errors.ts). */
type Runs = Pick<Database.Statement, 'run' | 'get' | 'all'>;

export class AuthStore implements AuthBook {
  readonly #db: Database.Database;
  readonly #path: string;

  constructor(path: string) {
    this.#path = path;
    try {
      this.#db = new Database(path);
      this.#db.pragma('journal_mode = WAL');
      this.#db.pragma('busy_timeout = 5000');
      this.#db.exec(SCHEMA);
      // Added columns (a state folder from before atomic enrolment): a token used then counts as spent.
      const cols = (this.#db.prepare('PRAGMA table_info(hosting_tokens)').all() as { name: string }[]).map((c) => c.name);
      if (!cols.includes('used_key')) this.#db.exec('ALTER TABLE hosting_tokens ADD COLUMN used_key TEXT');
      if (!cols.includes('confirmed_at'))
        this.#db.exec('ALTER TABLE hosting_tokens ADD COLUMN confirmed_at TEXT; UPDATE hosting_tokens SET confirmed_at = used_at WHERE used_at IS NOT NULL');
      // A hello looks for its node's pending token by name: indexed, however many tokens were used.
      this.#db.exec('CREATE INDEX IF NOT EXISTS hosting_tokens_pending ON hosting_tokens (network, used_by) WHERE confirmed_at IS NULL');
      // Issue 33: a token can be revoked, and `token list` shows when each was made.
      if (!cols.includes('revoked_at')) this.#db.exec('ALTER TABLE hosting_tokens ADD COLUMN revoked_at TEXT');
      if (!cols.includes('created_at')) this.#db.exec('ALTER TABLE hosting_tokens ADD COLUMN created_at TEXT');
      // A removal deletes its node's spent token by name: indexed too (at 10,000 tokens a scan cost 0.6 ms and more a removal).
      this.#db.exec('CREATE INDEX IF NOT EXISTS hosting_tokens_used_by ON hosting_tokens (network, used_by)');
      // Issue 28 (ADR 0042): reusable tokens (a count of uses, each use a row of hosting_token_uses) and ephemeral ones.
      if (!cols.includes('max_uses'))
        this.#db.exec(
          'ALTER TABLE hosting_tokens ADD COLUMN max_uses INTEGER; ALTER TABLE hosting_tokens ADD COLUMN uses INTEGER NOT NULL DEFAULT 0; ALTER TABLE hosting_tokens ADD COLUMN ephemeral_seconds INTEGER',
        );
      this.#pending = this.#countPending();
    } catch (cause) {
      // Sorted by condition (store-errors.ts): a damaged file is corrupt, naming it; a full disk is full.
      throw storeError(cause, path);
    }
  }

  /** Each statement prepared once (preparing costs more than running one of these); what it raises is sorted by condition. */
  readonly #statements = new Map<string, Runs>();
  #stmt(sql: string): Runs {
    let st = this.#statements.get(sql);
    if (!st) {
      const p = classified(this.#path, () => this.#db.prepare(sql));
      st = {
        run: (...a) => classified(this.#path, () => p.run(...a)),
        get: (...a) => classified(this.#path, () => p.get(...a)),
        all: (...a) => classified(this.#path, () => p.all(...a)),
      };
      this.#statements.set(sql, st);
    }
    return st;
  }

  /** One transaction; SQLite's errors in it sorted by condition (a commit on a full disk is MESHP_STORE_FULL). */
  #tx(fn: () => void): void {
    classified(this.#path, () => this.#db.transaction(fn)());
  }

  putToken(secret: string, t: Omit<StoredToken, 'usedAt' | 'usedBy' | 'usedKey' | 'confirmedAt' | 'revokedAt'>): void {
    this.#stmt(
      'INSERT INTO hosting_tokens (hash, network, mode, tags, fingerprint, expires_at, created_at, max_uses, ephemeral_seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
    ).run(
      hashSecret(secret),
      t.network,
      t.mode,
      JSON.stringify(t.tags),
      t.fingerprint,
      t.expiresAt,
      t.createdAt ?? null,
      t.maxUses ?? null,
      t.ephemeralSeconds ?? null,
    );
  }

  /** A reusable token's use: the count's conditional update decides (none left, or revoked: false), the use kept with the node's key. */
  takeUse(secret: string, by: string, at: string, nodeKey: string): boolean {
    const hash = hashSecret(secret);
    let taken = false;
    this.#tx(() => {
      taken =
        this.#stmt('UPDATE hosting_tokens SET uses = uses + 1 WHERE hash = ? AND max_uses IS NOT NULL AND uses < max_uses AND revoked_at IS NULL').run(hash)
          .changes === 1;
      if (taken)
        this.#stmt(
          'INSERT INTO hosting_token_uses (hash, network, node, node_key, used_at) SELECT hash, network, ?, ?, ? FROM hosting_tokens WHERE hash = ?',
        ).run(by, nodeKey, at, hash);
    });
    return taken;
  }

  tokenUse(secret: string, nodeKey: string): TokenUse | null {
    const r = this.#stmt(
      'SELECT node, node_key AS nodeKey, used_at AS usedAt, confirmed_at AS confirmedAt FROM hosting_token_uses WHERE hash = ? AND node_key = ?',
    ).get(hashSecret(secret), nodeKey) as TokenUse | undefined;
    return r ?? null;
  }

  getToken(secret: string): StoredToken | null {
    const r = this.#stmt('SELECT * FROM hosting_tokens WHERE hash = ?').get(hashSecret(secret)) as TokenRow | undefined;
    if (!r) return null;
    const { id: _id, ...t } = tokenFromRow(r);
    return t;
  }

  /** Single use: true only for the first caller (never for a revoked token). The key is kept: an enrolment whose answer was lost is completed with it (enrolment.ts). */
  markUsed(secret: string, by: string, at: string, nodeKey: string): boolean {
    return (
      this.#stmt('UPDATE hosting_tokens SET used_at = ?, used_by = ?, used_key = ? WHERE hash = ? AND used_at IS NULL AND revoked_at IS NULL').run(
        at,
        by,
        nodeKey,
        hashSecret(secret),
      ).changes === 1
    );
  }

  /** The network's tokens, newest first (those made before creation times were kept last), for `token list`. */
  listTokens(network: string): TokenInfo[] {
    const rows = this.#stmt('SELECT * FROM hosting_tokens WHERE network = ?').all(network) as TokenRow[];
    return rows.map(tokenFromRow).sort(newestFirst);
  }

  /** `token revoke ID`: an unused token made unusable (see revokeRow). */
  revokeToken(network: string, id: string, at: string): TokenRevocation {
    const [lo, hi] = idRange(id);
    const rows = this.#stmt('SELECT * FROM hosting_tokens WHERE network = ? AND hash >= ? AND hash < ? LIMIT 2').all(network, lo, hi) as TokenRow[];
    return revokeRow(
      rows,
      network,
      id,
      (hash) => this.#stmt('UPDATE hosting_tokens SET revoked_at = ? WHERE hash = ? AND used_at IS NULL AND revoked_at IS NULL').run(at, hash).changes === 1,
      (hash) => this.#stmt('SELECT * FROM hosting_tokens WHERE hash = ?').get(hash) as TokenRow | undefined,
    );
  }

  /**
   * The node opened a stream with its credential: it has it, and the token it enrolled with is
   * spent for good (no retry completes it again). Tokens pending are few: none pending, no look; else one indexed update.
   */
  confirm(network: string, node: string, at: string): void {
    if (this.#pending === 0) return;
    const n = this.#stmt('UPDATE hosting_tokens SET confirmed_at = ? WHERE network = ? AND used_by = ? AND confirmed_at IS NULL AND used_at IS NOT NULL').run(
      at,
      network,
      node,
    ).changes;
    const u = this.#stmt('UPDATE hosting_token_uses SET confirmed_at = ? WHERE network = ? AND node = ? AND confirmed_at IS NULL').run(
      at,
      network,
      node,
    ).changes;
    if (n + u > 0) this.#pending = Math.max(0, this.#pending - n - u);
  }

  #pending = 0;

  #countPending(): number {
    return (
      (this.#stmt('SELECT COUNT(*) AS n FROM hosting_tokens WHERE used_at IS NOT NULL AND confirmed_at IS NULL').get() as { n: number }).n +
      (this.#stmt('SELECT COUNT(*) AS n FROM hosting_token_uses WHERE confirmed_at IS NULL').get() as { n: number }).n
    );
  }

  /** Called after a token is marked used: the next hello looks for it. */
  pendingAdded(): void {
    this.#pending = Math.max(0, this.#pending) + 1;
  }

  putCredential(credential: string, network: string, node: string): void {
    this.#tx(() => {
      this.#stmt('DELETE FROM hosting_credentials WHERE network = ? AND node = ?').run(network, node);
      this.#stmt('INSERT INTO hosting_credentials (hash, network, node) VALUES (?, ?, ?)').run(hashSecret(credential), network, node);
    });
  }

  nodeOf(credential: string): { network: string; node: string } | null {
    const r = this.#stmt('SELECT network, node FROM hosting_credentials WHERE hash = ?').get(hashSecret(credential)) as
      { network: string; node: string } | undefined;
    return r ?? null;
  }

  /**
   * The node left (`meshp node remove`): its credential, report and spent token are forgotten and its
   * key revoked in the network, so neither the old credential, nor its token, nor an enrolment with the
   * same key brings it back.
   */
  revoke(network: string, node: string, nodeKey: string, at: string): void {
    this.#tx(() => {
      this.#stmt('DELETE FROM hosting_credentials WHERE network = ? AND node = ?').run(network, node);
      this.#stmt('DELETE FROM hosting_reports WHERE network = ? AND node = ?').run(network, node);
      // The token it enrolled with (under this name or one it had before a rename) goes too: a replay is then unknown.
      // One IN over a UNION, not `used_by = ? OR used_by IN (…)`: SQLite searches the index for that, and scans every token for the OR.
      this.#stmt(
        'DELETE FROM hosting_tokens WHERE network = ? AND used_at IS NOT NULL AND used_by IN (SELECT ? UNION SELECT old FROM hosting_renames WHERE network = ? AND new = ?)',
      ).run(network, node, network, node);
      this.#stmt('DELETE FROM hosting_renames WHERE network = ? AND new = ?').run(network, node);
      // A reusable token's use by it goes too (the count stays: the token enrolled it).
      this.#stmt('DELETE FROM hosting_token_uses WHERE network = ? AND node = ?').run(network, node);
      this.#stmt('INSERT OR REPLACE INTO hosting_revoked_keys (network, node_key, node, at) VALUES (?, ?, ?, ?)').run(network, nodeKey, node, at);
    });
  }

  /** The keys revoked when a node of this name was removed, in any network: a removed agent's hello is told so (session.ts). */
  revokedKeysOf(node: string): { network: string; nodeKey: string; at: string }[] {
    return this.#stmt('SELECT network, node_key AS nodeKey, at FROM hosting_revoked_keys WHERE node = ?').all(node) as {
      network: string;
      nodeKey: string;
      at: string;
    }[];
  }

  /** Who held the key when it was revoked, or null. */
  revokedKey(network: string, nodeKey: string): { node: string; at: string } | null {
    const r = this.#stmt('SELECT node, at FROM hosting_revoked_keys WHERE network = ? AND node_key = ?').get(network, nodeKey) as
      { node: string; at: string } | undefined;
    return r ?? null;
  }

  /** The credential, the report and the name the agent may still say in its hello follow a rename. */
  rename(network: string, from: string, to: string): void {
    this.#tx(() => {
      this.#stmt('UPDATE hosting_credentials SET node = ? WHERE network = ? AND node = ?').run(to, network, from);
      this.#stmt('UPDATE hosting_reports SET node = ? WHERE network = ? AND node = ?').run(to, network, from);
      this.#stmt('UPDATE hosting_token_uses SET node = ? WHERE network = ? AND node = ?').run(to, network, from);
      this.#stmt('UPDATE hosting_renames SET new = ? WHERE network = ? AND new = ?').run(to, network, from);
      this.#stmt('DELETE FROM hosting_renames WHERE network = ? AND old = ?').run(network, to);
      this.#stmt('INSERT OR REPLACE INTO hosting_renames (network, old, new) VALUES (?, ?, ?)').run(network, from, to);
    });
  }

  /** The name `old` carries now, when it was renamed (an agent offline during the rename still says the old one). */
  renamedTo(network: string, old: string): string | null {
    const r = this.#stmt('SELECT new FROM hosting_renames WHERE network = ? AND old = ?').get(network, old) as { new: string } | undefined;
    return r?.new ?? null;
  }

  /** The node's last report, as it came (for doctor). */
  putReport(network: string, node: string, report: ReportMessage): void {
    this.#stmt('INSERT OR REPLACE INTO hosting_reports (network, node, doc) VALUES (?, ?, ?)').run(network, node, JSON.stringify(report));
  }

  report(network: string, node: string): ReportMessage | null {
    const r = this.#stmt('SELECT doc FROM hosting_reports WHERE network = ? AND node = ?').get(network, node) as { doc: string } | undefined;
    return r ? (JSON.parse(r.doc) as ReportMessage) : null;
  }

  close(): void {
    this.#db.close();
  }

  /** Every row of the hosting's tables, by table, as stored (for a copy to another store: store-postgres). */
  dump(): Record<(typeof HOSTING_TABLES)[number], Record<string, unknown>[]> {
    return Object.fromEntries(HOSTING_TABLES.map((t) => [t, this.#db.prepare(`SELECT * FROM ${t}`).all() as Record<string, unknown>[]])) as Record<
      (typeof HOSTING_TABLES)[number],
      Record<string, unknown>[]
    >;
  }
}

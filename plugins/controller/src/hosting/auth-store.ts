/**
 * What the hosting keeps beside the controller's state, in the same SQLite file (own tables):
 * enrolment tokens by the hash of their secret (the secret itself is never stored), and each
 * node's credential by its hash.
 */
import Database from 'better-sqlite3';
import { createHash } from 'node:crypto';
import { MeshpError, type Mode, type ReportMessage } from '@meshp/core';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS hosting_tokens (hash TEXT PRIMARY KEY, network TEXT NOT NULL, mode TEXT NOT NULL,
  tags TEXT NOT NULL, fingerprint TEXT NOT NULL, expires_at TEXT NOT NULL, used_at TEXT, used_by TEXT);
CREATE TABLE IF NOT EXISTS hosting_credentials (hash TEXT PRIMARY KEY, network TEXT NOT NULL, node TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS hosting_credentials_node ON hosting_credentials (network, node);
CREATE TABLE IF NOT EXISTS hosting_reports (network TEXT NOT NULL, node TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (network, node));
`;

export interface StoredToken {
  network: string;
  mode: Mode;
  tags: string[];
  fingerprint: string;
  expiresAt: string;
  usedAt: string | null;
  usedBy: string | null;
}

export const hashSecret = (s: string): string => createHash('sha256').update(s).digest('hex');

export class AuthStore {
  readonly #db: Database.Database;

  constructor(path: string) {
    try {
      this.#db = new Database(path);
      this.#db.pragma('journal_mode = WAL');
      this.#db.pragma('busy_timeout = 5000');
      this.#db.exec(SCHEMA);
    } catch (cause) {
      throw new MeshpError('MESHP_STATE_CORRUPT', `controller state ${path} cannot be opened`, { cause });
    }
  }

  putToken(secret: string, t: Omit<StoredToken, 'usedAt' | 'usedBy'>): void {
    this.#db
      .prepare('INSERT INTO hosting_tokens (hash, network, mode, tags, fingerprint, expires_at) VALUES (?, ?, ?, ?, ?, ?)')
      .run(hashSecret(secret), t.network, t.mode, JSON.stringify(t.tags), t.fingerprint, t.expiresAt);
  }

  getToken(secret: string): StoredToken | null {
    const r = this.#db.prepare('SELECT * FROM hosting_tokens WHERE hash = ?').get(hashSecret(secret)) as
      | { network: string; mode: Mode; tags: string; fingerprint: string; expires_at: string; used_at: string | null; used_by: string | null }
      | undefined;
    if (!r) return null;
    return { network: r.network, mode: r.mode, tags: JSON.parse(r.tags) as string[], fingerprint: r.fingerprint, expiresAt: r.expires_at, usedAt: r.used_at, usedBy: r.used_by };
  }

  /** Single use: true only for the first caller. */
  markUsed(secret: string, by: string, at: string): boolean {
    return this.#db.prepare('UPDATE hosting_tokens SET used_at = ?, used_by = ? WHERE hash = ? AND used_at IS NULL').run(at, by, hashSecret(secret)).changes === 1;
  }

  putCredential(credential: string, network: string, node: string): void {
    this.#db.transaction(() => {
      this.#db.prepare('DELETE FROM hosting_credentials WHERE network = ? AND node = ?').run(network, node);
      this.#db.prepare('INSERT INTO hosting_credentials (hash, network, node) VALUES (?, ?, ?)').run(hashSecret(credential), network, node);
    })();
  }

  nodeOf(credential: string): { network: string; node: string } | null {
    const r = this.#db.prepare('SELECT network, node FROM hosting_credentials WHERE hash = ?').get(hashSecret(credential)) as { network: string; node: string } | undefined;
    return r ?? null;
  }

  /** The node's last report, as it came (for doctor). */
  putReport(network: string, node: string, report: ReportMessage): void {
    this.#db.prepare('INSERT OR REPLACE INTO hosting_reports (network, node, doc) VALUES (?, ?, ?)').run(network, node, JSON.stringify(report));
  }

  report(network: string, node: string): ReportMessage | null {
    const r = this.#db.prepare('SELECT doc FROM hosting_reports WHERE network = ? AND node = ?').get(network, node) as { doc: string } | undefined;
    return r ? (JSON.parse(r.doc) as ReportMessage) : null;
  }

  close(): void {
    this.#db.close();
  }
}

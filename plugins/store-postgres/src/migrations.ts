/**
 * The database's schema, versioned: `meshp_schema` records each migration applied, by number. Each
 * migration runs in one transaction with its record, under an advisory lock, so replicas that start
 * at once apply it once. A database that records a number past the last one known here was
 * migrated by a newer meshp: refused (MESHP_STORE_TOO_NEW), nothing touched.
 */
import pg from 'pg';
import { MeshpError } from '@meshp/core';

export interface Migration {
  version: number;
  what: string;
  sql: string;
}

export const MIGRATIONS: readonly Migration[] = [
  {
    version: 1,
    what: "the controller's state: networks, members, change log, sync records, tokens (each record a JSON document)",
    sql: `
CREATE TABLE networks (name TEXT PRIMARY KEY, version INTEGER NOT NULL, doc JSONB NOT NULL);
CREATE TABLE members (network TEXT NOT NULL, id TEXT NOT NULL, doc JSONB NOT NULL, PRIMARY KEY (network, id));
CREATE TABLE log (network TEXT NOT NULL, version INTEGER NOT NULL, doc JSONB NOT NULL, PRIMARY KEY (network, version));
CREATE TABLE sync (network TEXT NOT NULL, id TEXT NOT NULL, doc JSONB NOT NULL, PRIMARY KEY (network, id));
CREATE TABLE tokens (token TEXT PRIMARY KEY, doc JSONB NOT NULL);`,
  },
  {
    version: 2,
    what: "the hosting's tables: enrolment tokens and node credentials by hash, reports, revoked keys, renames",
    sql: `
CREATE TABLE hosting_tokens (hash TEXT PRIMARY KEY, network TEXT NOT NULL, mode TEXT NOT NULL, tags TEXT NOT NULL, fingerprint TEXT NOT NULL,
  expires_at TEXT NOT NULL, used_at TEXT, used_by TEXT, used_key TEXT, confirmed_at TEXT);
CREATE INDEX hosting_tokens_pending ON hosting_tokens (network, used_by) WHERE confirmed_at IS NULL;
CREATE TABLE hosting_credentials (hash TEXT PRIMARY KEY, network TEXT NOT NULL, node TEXT NOT NULL);
CREATE INDEX hosting_credentials_node ON hosting_credentials (network, node);
CREATE TABLE hosting_reports (network TEXT NOT NULL, node TEXT NOT NULL, doc TEXT NOT NULL, PRIMARY KEY (network, node));
CREATE TABLE hosting_revoked_keys (network TEXT NOT NULL, node_key TEXT NOT NULL, node TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (network, node_key));
CREATE TABLE hosting_renames (network TEXT NOT NULL, old TEXT NOT NULL, new TEXT NOT NULL, PRIMARY KEY (network, old));`,
  },
  {
    version: 3,
    what: "the used tokens by node: a node's removal deletes its spent token through it, not by reading every token",
    sql: `
CREATE INDEX hosting_tokens_used_by ON hosting_tokens (network, used_by) WHERE used_at IS NOT NULL;`,
  },
  {
    version: 4,
    what: 'enrolment tokens read back (issue 33): when each was made, and when the operator revoked it',
    sql: `
ALTER TABLE hosting_tokens ADD COLUMN created_at TEXT;
ALTER TABLE hosting_tokens ADD COLUMN revoked_at TEXT;`,
  },
  {
    version: 5,
    what: 'the audit log (issue 28): every admin change, by time, actor and network, one log for every replica',
    sql: `
CREATE TABLE audit_log (id BIGSERIAL PRIMARY KEY, at TEXT NOT NULL, actor TEXT NOT NULL, network TEXT NOT NULL, method TEXT NOT NULL, node TEXT,
  summary TEXT NOT NULL, state_version BIGINT NOT NULL);
CREATE INDEX audit_log_at ON audit_log (network, at);`,
  },
  {
    version: 6,
    what: 'named admin credentials (issue 28): each by the hash of its secret, its name the actor in the audit log, its role',
    sql: `
CREATE TABLE admin_credentials (hash TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL, created_at TEXT NOT NULL, revoked_at TEXT);`,
  },
  {
    version: 8,
    what: 'reusable and ephemeral enrolment tokens (issue 28, ADR 0042): a use count, each use by node and key, when each ephemeral node was last seen',
    sql: `
ALTER TABLE hosting_tokens ADD COLUMN max_uses INTEGER;
ALTER TABLE hosting_tokens ADD COLUMN uses INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hosting_tokens ADD COLUMN ephemeral_seconds INTEGER;
CREATE TABLE hosting_token_uses (hash TEXT NOT NULL, network TEXT NOT NULL, node TEXT NOT NULL, node_key TEXT NOT NULL, used_at TEXT NOT NULL,
  confirmed_at TEXT, PRIMARY KEY (hash, node_key));
CREATE INDEX hosting_token_uses_node ON hosting_token_uses (network, node);
CREATE TABLE hosting_seen (network TEXT NOT NULL, node TEXT NOT NULL, seen_at TEXT NOT NULL, PRIMARY KEY (network, node));`,
  },
  {
    version: 9,
    what: "the web console's convergence history (issue 30): each network's sample of every node's gap, kept for the console's window across restarts",
    sql: `
CREATE TABLE console_history (network TEXT NOT NULL, at BIGINT NOT NULL, gaps JSONB NOT NULL, PRIMARY KEY (network, at));
CREATE INDEX console_history_at ON console_history (at);`,
  },
  {
    version: 10,
    what: "the sync record's restart fields as columns (issue 31, ADR 0044): a row of before keeps its whole record in doc and is read as it was",
    sql: `
ALTER TABLE sync ADD COLUMN applied BIGINT;
ALTER TABLE sync ADD COLUMN applied_hash TEXT;
ALTER TABLE sync ADD COLUMN sent BIGINT;
ALTER TABLE sync ADD COLUMN basis BIGINT;
ALTER TABLE sync ADD COLUMN target BIGINT;
ALTER TABLE sync ADD COLUMN snapshot_pending SMALLINT;
ALTER TABLE sync ADD COLUMN expectations TEXT;`,
  },
];

/** The advisory lock migrations take (an arbitrary constant of meshp's). */
const MIGRATION_LOCK = 0x6d657368;

/** Applies the migrations the database lacks; the numbers applied now. */
export async function migrate(url: string, migrations: readonly Migration[] = MIGRATIONS): Promise<number[]> {
  // A database behind a partition refuses the start in 10 s (a supervisor starts it again), not after the kernel's SYN retries.
  const c = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  try {
    await c.connect();
  } catch (cause) {
    throw new MeshpError('MESHP_STORE_UNAVAILABLE', `the controller's database ${redact(url)} cannot be reached: ${(cause as Error).message}`, { cause });
  }
  const known = Math.max(0, ...migrations.map((m) => m.version));
  const applied: number[] = [];
  try {
    for (const m of [{ version: 0, what: '', sql: '' }, ...migrations]) {
      await c.query('BEGIN');
      try {
        await c.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
        await c.query(
          'CREATE TABLE IF NOT EXISTS meshp_schema (version INTEGER PRIMARY KEY, what TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())',
        );
        const at = Number((await c.query<{ v: number | null }>('SELECT max(version) AS v FROM meshp_schema')).rows[0]?.v ?? 0);
        if (at > known)
          throw new MeshpError(
            'MESHP_STORE_TOO_NEW',
            `the controller's database is at schema ${at}, this meshp knows up to ${known}: run a meshp at least as new as the one that migrated it`,
          );
        if (m.version > at) {
          await c.query(m.sql);
          await c.query('INSERT INTO meshp_schema (version, what) VALUES ($1, $2)', [m.version, m.what]);
          applied.push(m.version);
        }
        await c.query('COMMIT');
      } catch (e) {
        await c.query('ROLLBACK').catch(() => undefined);
        throw e;
      }
    }
  } finally {
    await c.end().catch(() => undefined);
  }
  return applied;
}

/** The schema versions recorded, in order. */
export async function schemaVersions(url: string): Promise<number[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return (await c.query<{ version: number }>('SELECT version FROM meshp_schema ORDER BY version')).rows.map((r) => r.version);
  } finally {
    await c.end();
  }
}

/** The URL without its password, for messages. */
export function redact(url: string): string {
  return url.replace(/\/\/([^:/@]*):[^@/]*@/, '//$1:***@');
}

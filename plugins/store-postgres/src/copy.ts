/**
 * Moving a controller from SQLite to PostgreSQL: the state folder's controller.db — the controller's
 * state and the hosting's tokens, credentials, reports, revoked keys and renames, the audit log and
 * the named admin credentials (issue 28) — copied into an
 * empty, migrated database in one transaction (all of it or none). Agents keep their credentials
 * and versions: pointed at a replica on the database, they resume.
 */
import type { StoredState } from '@meshp/core';
import { HOSTING_TABLES } from '@meshp/core/store';
import { MeshpError } from '@meshp/core';
import type { Stmt, SyncPg } from './sync-pg.js';
import { LOAD_TIMEOUT_MS } from './controller-store.js';

/** Each table's columns, in the order the copy writes them (the SQLite AuthStore's names). */
const HOSTING_COLUMNS: Record<(typeof HOSTING_TABLES)[number], string[]> = {
  hosting_tokens: [
    'hash',
    'network',
    'mode',
    'tags',
    'fingerprint',
    'expires_at',
    'used_at',
    'used_by',
    'used_key',
    'confirmed_at',
    'created_at',
    'revoked_at',
    'max_uses',
    'uses',
    'ephemeral_seconds',
  ],
  hosting_credentials: ['hash', 'network', 'node'],
  hosting_reports: ['network', 'node', 'doc'],
  hosting_revoked_keys: ['network', 'node_key', 'node', 'at'],
  hosting_renames: ['network', 'old', 'new'],
  hosting_token_uses: ['hash', 'network', 'node', 'node_key', 'used_at', 'confirmed_at'],
};

/** The integer columns of the hosting's tables (issue 28: a reusable token's count, an ephemeral token's grace). */
const INT_COLUMNS: Record<string, string> = {
  max_uses: `(x->>'max_uses')::int`,
  uses: `COALESCE((x->>'uses')::int, 0)`,
  ephemeral_seconds: `(x->>'ephemeral_seconds')::int`,
};

const ADMIN_COLUMNS = ['hash', 'name', 'role', 'created_at', 'revoked_at'];

/** One statement per table: the rows go as one JSON array, unpacked by PostgreSQL. */
function insertAll(table: string, columns: string[], rows: Record<string, unknown>[]): Stmt {
  const pick = (c: string) =>
    c === 'doc' && !table.startsWith('hosting_') ? `x->'doc'` : c === 'version' ? `(x->>'version')::int` : (INT_COLUMNS[c] ?? `x->>'${c}'`);
  return {
    text: `INSERT INTO ${table} (${columns.join(', ')}) SELECT ${columns.map(pick).join(', ')} FROM jsonb_array_elements($1::jsonb) AS x`,
    values: [JSON.stringify(rows)],
  };
}

/** The audit log and the named admin credentials, as statements of the copy's transaction. */
const extraStmts = (extra: CopyExtra): Stmt[] => [
  auditInsert(extra.audit ?? []),
  insertAll(
    'admin_credentials',
    ADMIN_COLUMNS,
    (extra.admins ?? []).map((r) => Object.fromEntries(ADMIN_COLUMNS.map((c) => [c, r[c] ?? null]))),
  ),
];

export interface CopyCounts {
  networks: number;
  members: number;
  log: number;
  sync: number;
  tokens: number;
  hosting: number;
  /** The audit log's entries (issue 28), oldest first as they were. */
  audit: number;
  /** The named admin credentials (issue 28), revoked ones too. */
  admins: number;
}

/** The audit log and the named admin credentials of the SQLite file (their stores' dump()), copied with the rest. */
export interface CopyExtra {
  audit?: Record<string, unknown>[];
  admins?: Record<string, unknown>[];
}

/** The audit log's rows in their order (the id is the database's own, given in that order), the version a number. */
const auditInsert = (rows: Record<string, unknown>[]): Stmt => ({
  text: `INSERT INTO audit_log (at, actor, network, method, node, summary, state_version)
    SELECT x->>'at', x->>'actor', x->>'network', x->>'method', x->>'node', x->>'summary', (x->>'state_version')::bigint
    FROM jsonb_array_elements($1::jsonb) WITH ORDINALITY AS e(x, n) ORDER BY n`,
  values: [JSON.stringify(rows)],
});

/** Copies into the database `db` (migrated); refused when it holds a controller's state already. */
export function copyState(
  db: SyncPg,
  state: StoredState,
  hosting: Partial<Record<(typeof HOSTING_TABLES)[number], Record<string, unknown>[]>>,
  extra: CopyExtra = {},
): CopyCounts {
  const held = db.rows<{ n: number }>('SELECT count(*)::int AS n FROM networks')[0]!.n;
  if (held > 0) throw new MeshpError('MESHP_USAGE', `the database holds a controller's state already (${held} network(s)): copy into an empty one`);
  const stmts: Stmt[] = [
    insertAll(
      'networks',
      ['name', 'version', 'doc'],
      state.networks.map((n) => ({ name: n.name, version: n.version, doc: n })),
    ),
    insertAll(
      'members',
      ['network', 'id', 'doc'],
      state.members.map((m) => ({ network: m.network, id: m.member.id, doc: m.member })),
    ),
    insertAll(
      'log',
      ['network', 'version', 'doc'],
      state.log.map((l) => ({ network: l.network, version: l.entry.version, doc: l.entry })),
    ),
    insertAll(
      'sync',
      ['network', 'id', 'doc'],
      state.sync.map((s) => ({ network: s.network, id: s.id, doc: s.sync })),
    ),
    insertAll(
      'tokens',
      ['token', 'doc'],
      state.tokens.map((t) => ({ token: t.token, doc: t })),
    ),
    ...HOSTING_TABLES.map((t) =>
      insertAll(
        t,
        HOSTING_COLUMNS[t],
        (hosting[t] ?? []).map((r) => Object.fromEntries(HOSTING_COLUMNS[t].map((c) => [c, r[c] ?? null]))),
      ),
    ),
    ...extraStmts(extra),
  ];
  try {
    // A stopped controller's whole state, nothing served meanwhile: the load's time, not a change's.
    db.run([{ text: 'BEGIN' }, { text: `SET LOCAL statement_timeout = ${LOAD_TIMEOUT_MS}` }, ...stmts, { text: 'COMMIT' }], LOAD_TIMEOUT_MS);
  } catch (e) {
    try {
      db.run([{ text: 'ROLLBACK' }]);
    } catch {
      // the connection went with the transaction
    }
    throw e;
  }
  return countsOf(state, hosting, extra);
}

/** What a copy wrote, by kind. */
function countsOf(state: StoredState, hosting: Partial<Record<(typeof HOSTING_TABLES)[number], Record<string, unknown>[]>>, extra: CopyExtra): CopyCounts {
  const hostingRows = HOSTING_TABLES.reduce((k, t) => k + (hosting[t]?.length ?? 0), 0);
  return {
    networks: state.networks.length,
    members: state.members.length,
    log: state.log.length,
    sync: state.sync.length,
    tokens: state.tokens.length,
    hosting: hostingRows,
    audit: extra.audit?.length ?? 0,
    admins: extra.admins?.length ?? 0,
  };
}

/**
 * Opening host.db: WAL with synchronous=FULL, then SQLite's quick_check before anything is written
 * (a damaged file is refused naming itself and what was found, not met later in whichever table a
 * command reads), then the schema and its migrations.
 */
import Database from 'better-sqlite3';
import { damaged, sqliteCode, storeError } from './store-errors.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS owned (
  key TEXT PRIMARY KEY, kind TEXT NOT NULL, module TEXT NOT NULL, digest TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS originals (
  key TEXT PRIMARY KEY, kind TEXT NOT NULL, module TEXT NOT NULL, original BLOB NOT NULL,
  fingerprint TEXT NOT NULL, found_at TEXT NOT NULL, last_fingerprint TEXT, changed_at TEXT);
CREATE TABLE IF NOT EXISTS intents (
  key TEXT PRIMARY KEY, kind TEXT NOT NULL, module TEXT NOT NULL, digest TEXT NOT NULL, at TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS kv (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS reports (id INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, report TEXT NOT NULL);
`;

/**
 * Changes to the schema of a host.db that exists, in order; `PRAGMA user_version` says how many
 * were applied. Append only: a node upgraded from any earlier version runs the ones it lacks.
 */
const MIGRATIONS = [
  // 1: which file (device:inode) an owned or found file is, whatever path reaches it.
  'ALTER TABLE owned ADD COLUMN identity TEXT; ALTER TABLE originals ADD COLUMN identity TEXT;',
  // 2: the agent's view per peer and per component, so a delta writes what it changed (saveView).
  `CREATE TABLE IF NOT EXISTS view_peers (id TEXT PRIMARY KEY, doc TEXT NOT NULL);
   CREATE TABLE IF NOT EXISTS view_components (name TEXT PRIMARY KEY, doc TEXT NOT NULL);`,
  // 3 (issue 29, untake): whether the host made an owned resource where nothing was, and a found file's mode and owner.
  'ALTER TABLE owned ADD COLUMN made INTEGER; ALTER TABLE originals ADD COLUMN meta TEXT;',
];

/**
 * How many of quick_check's findings are kept: the first few say where the damage is. N bounds the
 * rows it answers, not its work: it reads every b-tree page of the file whatever N, so its cost
 * grows with host.db (measured by bench/host-store-open.bench.mjs).
 */
export const QUICK_CHECK_ROWS = 3;

/** A finding is kept to this many characters: the line names the file first. */
const FINDING_CHARS = 160;

function migrate(db: Database.Database): void {
  const applied = db.pragma('user_version', { simple: true }) as number;
  db.transaction(() => {
    for (let i = applied; i < MIGRATIONS.length; i += 1) db.exec(MIGRATIONS[i]!);
    if (applied < MIGRATIONS.length) db.pragma(`user_version = ${MIGRATIONS.length}`);
  })();
}

/**
 * quick_check's findings, one line; null when it says ok. A b-tree page whose header is destroyed
 * makes the check itself fail with SQLITE_CORRUPT instead of answering rows: that is its finding.
 */
function quickCheck(db: Database.Database): string | null {
  let rows: { quick_check: string }[];
  try {
    rows = db.pragma(`quick_check(${QUICK_CHECK_ROWS})`) as { quick_check: string }[];
  } catch (e) {
    const code = sqliteCode(e);
    if (code?.startsWith('SQLITE_CORRUPT') || code === 'SQLITE_NOTADB') return `${code}: ${(e as Error).message}`;
    throw e;
  }
  if (rows.length === 1 && rows[0]!.quick_check === 'ok') return null;
  // One row may hold several findings, a line each, under a "*** in database main ***" heading.
  const found = rows.flatMap((r) => r.quick_check.split('\n')).filter((l) => l !== '' && !l.startsWith('***'));
  return found
    .slice(0, QUICK_CHECK_ROWS)
    .map((l) => (l.length > FINDING_CHARS ? `${l.slice(0, FINDING_CHARS)}…` : l))
    .join('; ');
}

/** The database, checked and migrated; a failure is closed again and refused by its condition (store-errors.ts). */
export function openHostDb(file: string): Database.Database {
  let db: Database.Database | undefined;
  let doing = 'opening it';
  try {
    db = new Database(file, { timeout: 5000 });
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    doing = 'checking it (quick_check)';
    const found = quickCheck(db);
    if (found !== null) throw damaged(file, found);
    doing = 'making or migrating its tables';
    db.exec(SCHEMA);
    migrate(db);
    return db;
  } catch (e) {
    // Not left open: a refused store holds no descriptor on the file (nor on a mount under it).
    try {
      db?.close();
    } catch {
      // closing what failed to open: the refusal below is what the operator needs
    }
    throw storeError(e, file, doing);
  }
}

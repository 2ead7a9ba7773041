/**
 * `@meshp/store-postgres`: the controller's state in PostgreSQL, for several `meshp controller
 * serve` replicas on one database (docs/store-postgres.md). `openPostgresStore(url)` migrates the
 * schema, then gives the controller's store and the hosting's token and credential store, with the
 * follower that keeps this replica's memory up with the others' commits.
 */
import type { ControllerStore } from '@meshp/core';
import { PostgresAuthStore } from './auth-store.js';
import { PostgresAuditStore } from './audit-store.js';
import { PostgresAdminCredentialStore } from './admin-credential-store.js';
import { PostgresHistoryStore } from './history-store.js';
import { PostgresControllerStore } from './controller-store.js';
import { Follower, type FollowOptions } from './follow.js';
import { migrate, redact } from './migrations.js';
import { SyncPg } from './sync-pg.js';

export { PostgresControllerStore, STORE_LOCK, CHANNEL } from './controller-store.js';
export { PostgresAuthStore } from './auth-store.js';
export { PostgresAuditStore } from './audit-store.js';
export { PostgresAdminCredentialStore } from './admin-credential-store.js';
export { PostgresHistoryStore } from './history-store.js';
export { Follower, DEFAULT_POLL_MS, type FollowOptions } from './follow.js';
export { MIGRATIONS, migrate, schemaVersions, redact, type Migration } from './migrations.js';
export {
  SyncPg,
  waitForAnswer,
  isStale,
  STALE_STATE,
  DEFAULT_CALL_TIMEOUT_MS,
  PROBE_FIRST_MS,
  PROBE_MAX_MS,
  type Stmt,
  type Row,
  type StoreHealth,
} from './sync-pg.js';
export { codeOf, connectionLost } from './sql-state.js';
export { copyState, type CopyCounts, type CopyExtra } from './copy.js';

export interface PostgresStore {
  store: PostgresControllerStore;
  auth: PostgresAuthStore;
  /** The audit log (issue 28), on the same connection. */
  audit: PostgresAuditStore;
  /** The named admin credentials (issue 28), on the same connection. */
  admins: PostgresAdminCredentialStore;
  /** The web console's convergence history (issue 30), on the same connection. */
  history: PostgresHistoryStore;
  follower: Follower;
  /** The connection both stores use (for a copy into the database: copy.ts). */
  db: SyncPg;
  /** The URL without its password, for the log. */
  label: string;
  /** Migrations applied by this open. */
  migrated: number[];
  close(): Promise<void>;
}

export const isPostgresUrl = (s: string): boolean => /^postgres(ql)?:\/\//.test(s);

export interface OpenOptions extends FollowOptions {
  /** The longest one batch may take (DEFAULT_CALL_TIMEOUT_MS): the longest the controller's event loop waits on the database. */
  callTimeoutMs?: number;
  /** Told once when the database is found down (every store call is then refused at once), and when it answers again. */
  onDown?: (reason: string) => void;
  onUp?: (downMs: number) => void;
}

/** Opens (and migrates) the database; the follower starts with `store.follower.start()` once a controller follows the store. */
export async function openPostgresStore(url: string, options: OpenOptions = {}): Promise<PostgresStore> {
  const migrated = await migrate(url);
  const db = new SyncPg(url, options.callTimeoutMs);
  db.rows('SELECT 1');
  const store = new PostgresControllerStore(db);
  // Read without the event loop waiting on the database (controller-store.ts catchUpAsync).
  const follower = new Follower(url, () => store.catchUpAsync(), options);
  db.onDown = (reason) => options.onDown?.(reason);
  // Back: what the others committed meanwhile (and a commit of ours whose answer was lost) is caught up now, not at the next poll.
  db.onUp = (ms) => {
    options.onUp?.(ms);
    follower.poke();
  };
  return {
    store,
    auth: new PostgresAuthStore(db),
    audit: new PostgresAuditStore(db),
    admins: new PostgresAdminCredentialStore(db),
    history: new PostgresHistoryStore(db),
    follower,
    db,
    label: redact(url),
    migrated,
    close: async () => {
      await follower.close();
      store.close();
    },
  };
}

export type { ControllerStore };

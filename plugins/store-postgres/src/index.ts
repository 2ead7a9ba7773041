/**
 * `@meshp/store-postgres`: the controller's state in PostgreSQL, for several `meshp controller
 * serve` replicas on one database (docs/store-postgres.md). `openPostgresStore(url)` migrates the
 * schema, then gives the controller's store and the hosting's token and credential store, with the
 * follower that keeps this replica's memory up with the others' commits.
 */
import type { ControllerStore } from '@meshp/core';
import { PostgresAuthStore } from './auth-store.js';
import { PostgresControllerStore } from './controller-store.js';
import { Follower, type FollowOptions } from './follow.js';
import { migrate, redact } from './migrations.js';
import { SyncPg } from './sync-pg.js';

export { PostgresControllerStore, STORE_LOCK, CHANNEL } from './controller-store.js';
export { PostgresAuthStore } from './auth-store.js';
export { Follower, DEFAULT_POLL_MS, type FollowOptions } from './follow.js';
export { MIGRATIONS, migrate, schemaVersions, redact, type Migration } from './migrations.js';
export { SyncPg, waitForAnswer, type Stmt, type Row } from './sync-pg.js';
export { copyState, type CopyCounts } from './copy.js';

export interface PostgresStore {
  store: PostgresControllerStore;
  auth: PostgresAuthStore;
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

/** Opens (and migrates) the database; the follower starts with `store.follower.start()` once a controller follows the store. */
export async function openPostgresStore(url: string, options: FollowOptions & { callTimeoutMs?: number } = {}): Promise<PostgresStore> {
  const migrated = await migrate(url);
  const db = new SyncPg(url, options.callTimeoutMs);
  db.rows('SELECT 1');
  const store = new PostgresControllerStore(db);
  const follower = new Follower(url, () => store.catchUp(), options);
  return {
    store,
    auth: new PostgresAuthStore(db),
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

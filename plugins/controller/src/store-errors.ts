/**
 * What a store raised, by condition (issue 24): the one classifier every error of the controller's
 * stores goes through (sqlite-store.ts, hosting/auth-store.ts, and the controller's committed image
 * for whatever another store raises). An operator told "corrupt" restores from a backup, so only
 * real damage is MESHP_STATE_CORRUPT, naming the file; a full disk is MESHP_STORE_FULL; a store
 * busy, locked or not answering is MESHP_STORE_UNAVAILABLE.
 */
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { MeshpError, isMeshpError } from '@meshp/core';

/** The condition codes a store error is sorted into. */
export const STORE_FAULTS = ['MESHP_STORE_FULL', 'MESHP_STORE_UNAVAILABLE', 'MESHP_STATE_CORRUPT'] as const;
export type StoreFault = (typeof STORE_FAULTS)[number];

/** Whether the error is a store's condition (the store is down), not a refusal of the change itself. */
export function isStoreFault(e: unknown): e is MeshpError & { code: StoreFault } {
  return isMeshpError(e) && (STORE_FAULTS as readonly string[]).includes(e.code);
}

/** Free bytes for an unprivileged writer on the filesystem holding `file` (null: not known). */
function freeBytes(file: string): number | null {
  try {
    const s = statfsSync(dirname(file));
    return s.bavail * s.bsize;
  } catch {
    return null;
  }
}

/** Below this, an I/O error on a write is taken for a full disk (SQLite reports ENOSPC on the WAL as SQLITE_IOERR_WRITE). */
const FULL_BELOW_BYTES = 64 * 1024;

/**
 * The error as a MeshpError by condition; `file`: the store's file, named in the message (and
 * looked at: an I/O error where its filesystem has no room left is a full disk). A MeshpError
 * passes as it is (a store that sorted its own, store-postgres); a refusal thrown by the caller's
 * code inside a transaction is not a store's and is not brought here.
 */
export function storeError(e: unknown, file?: string): MeshpError {
  if (isMeshpError(e)) return e;
  const sqlite = typeof e === 'object' && e !== null && typeof (e as { code?: unknown }).code === 'string' ? (e as { code: string }).code : '';
  const where = file && file !== ':memory:' ? ` (${file})` : '';
  const why = e instanceof Error ? e.message : String(e);
  const onDisk = !!file && file !== ':memory:';
  if (sqlite === 'SQLITE_FULL' || sqlite === 'ENOSPC' || (sqlite.startsWith('SQLITE_IOERR') && onDisk && (freeBytes(file) ?? Infinity) < FULL_BELOW_BYTES)) {
    return new MeshpError('MESHP_STORE_FULL', `the disk under the controller's state${where} is full: ${why}; nothing was changed`, { cause: e });
  }
  if (sqlite.startsWith('SQLITE_CORRUPT') || sqlite === 'SQLITE_NOTADB') {
    return new MeshpError('MESHP_STATE_CORRUPT', `the controller's state file${where || ' '} is damaged: ${why}`, { cause: e, details: { file: file ?? '' } });
  }
  // Busy, locked, an I/O error with room left, a connection lost: the store did not answer; it may come back.
  return new MeshpError('MESHP_STORE_UNAVAILABLE', `the controller's store${where} did not take the write: ${why}`, { cause: e });
}

/** `fn`, its store errors sorted (see storeError). */
export function classified<T>(file: string | undefined, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    throw storeError(e, file);
  }
}

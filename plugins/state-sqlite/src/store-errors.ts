/**
 * What a failure of host.db is, by its condition, not by the call that met it (issue 24): a full
 * disk is not damage, and an operator told "corrupt" restores from a backup for no reason.
 *   SQLITE_FULL, or any SQLITE_IOERR* while the filesystem under the file has no room → MESHP_STORE_FULL
 *   SQLITE_CORRUPT*, SQLITE_NOTADB                                                   → MESHP_STATE_CORRUPT
 *   SQLITE_BUSY*, SQLITE_LOCKED*                                                     → MESHP_STATE_LOCKED
 * Each names the file and what was being done. Another SQLite failure names them too, under the
 * plugin's generic code; what is not SQLite's passes through as it is.
 */
import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { MeshpError } from '@meshp/core';

/**
 * Below this much free space an I/O error is the disk being full. SQLite reports ENOSPC on a write
 * as SQLITE_FULL, but a full disk met elsewhere is an I/O error of another name: growing the
 * shared-memory index (32 KiB) at open is SQLITE_IOERR_SHMSIZE, seen on a full tmpfs. What one
 * write of the store needs is a few pages, so 1 MiB left is no room.
 */
export const FULL_BELOW_BYTES = 1024 * 1024;

/** What the filesystem under a folder has left for this process. */
export interface Space {
  bytes: number;
  /** Free inodes; null where the filesystem does not count them (btrfs reports 0 of 0). */
  inodes: number | null;
}

/** Read with statfs; root may write into the blocks reserved for it, so its free count is bfree. Null when statfs fails. */
export function spaceLeft(dir: string): Space | null {
  try {
    const s = statfsSync(dir);
    const blocks = process.getuid?.() === 0 ? s.bfree : s.bavail;
    return { bytes: blocks * s.bsize, inodes: s.files > 0 ? s.ffree : null };
  } catch {
    return null;
  }
}

export function noRoom(space: Space | null): boolean {
  return space !== null && (space.bytes < FULL_BELOW_BYTES || space.inodes === 0);
}

function sayBytes(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${Math.floor(n / 1024)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function sayFree(space: Space | null): string {
  if (!space) return 'free space not readable';
  return space.inodes === 0 ? 'no free inodes' : `${sayBytes(space.bytes)} free`;
}

/** better-sqlite3's SqliteError carries SQLite's extended result code by name, e.g. SQLITE_IOERR_SHMSIZE. */
export function sqliteCode(e: unknown): string | null {
  const code = (e as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('SQLITE_') ? code : null;
}

/** SQLITE_IOERR_SHMSIZE → SQLITE_IOERR. */
function primary(code: string): string {
  return code.split('_').slice(0, 2).join('_');
}

/** What to do with a damaged host.db: it holds the originals of the files the host holds. */
export const KEEP_IT = 'keep this file (it holds the originals of held files) and restore host.db from a backup';

/**
 * The coded error for a failure of `file` while `doing` (a phrase: "recording the original of
 * file:/etc/x"). A write that fails this way was rolled back by SQLite: what was recorded before it
 * is as it was, which the messages say. `space` is statfs by default (a parameter for the tests).
 */
export function storeError(e: unknown, file: string, doing: string, space: (dir: string) => Space | null = spaceLeft): unknown {
  if (e instanceof MeshpError) return e;
  // Node's own calls on the folder (making host.db before SQLite opens it) say ENOSPC or EDQUOT.
  const errno = (e as NodeJS.ErrnoException | null)?.code;
  const code = sqliteCode(e) ?? (errno === 'ENOSPC' || errno === 'EDQUOT' ? 'SQLITE_FULL' : null);
  if (code === null) return e;
  const why = `${errno && !errno.startsWith('SQLITE_') ? errno : code}: ${e instanceof Error ? e.message : String(e)}`;
  const options = { cause: e, details: { file, sqlite: code } };
  const kind = primary(code);
  if (kind === 'SQLITE_FULL' || kind === 'SQLITE_IOERR') {
    const left = space(dirname(file));
    if (kind === 'SQLITE_FULL' || noRoom(left)) {
      return new MeshpError(
        'MESHP_STORE_FULL',
        `${file}: the disk under it is full (${sayFree(left)}): ${doing} was refused, nothing in it changed (${why})`,
        options,
      );
    }
  }
  if (kind === 'SQLITE_CORRUPT' || kind === 'SQLITE_NOTADB') {
    return new MeshpError('MESHP_STATE_CORRUPT', `${file} is damaged: ${doing} was refused (${why}); ${KEEP_IT}`, options);
  }
  if (kind === 'SQLITE_BUSY' || kind === 'SQLITE_LOCKED') {
    return new MeshpError('MESHP_STATE_LOCKED', `${file} is in use by another process: ${doing} was refused (${why})`, options);
  }
  return new MeshpError('MESHP_PLUGIN_FAILED', `${file}: ${doing} failed (${why})`, options);
}

/** Damage quick_check found when the store opened: `found` is what it said, its first rows. */
export function damaged(file: string, found: string): MeshpError {
  return new MeshpError('MESHP_STATE_CORRUPT', `${file} is damaged (quick_check: ${found}): it was not used and not changed; ${KEEP_IT}`, {
    details: { file, quickCheck: found },
  });
}

/**
 * renameat2(2), which Node does not expose, called on the libc through koffi (an FFI with
 * prebuilt binaries). Two flags close the window a check-then-rename leaves open:
 *
 * - RENAME_NOREPLACE puts a new file only where nothing is: a file that appeared after the plan
 *   saw the place empty is refused by the kernel (EEXIST), not overwritten.
 * - RENAME_EXCHANGE swaps two entries atomically: the replaced entry is kept under the temp name,
 *   so what was really replaced is checked afterwards and swapped back when it is not what the
 *   plan saw. The declared path is never absent and never written through.
 *
 * Both work relative to an open folder (its fd), never through a path that could be swapped. A
 * file system without the flags (EINVAL) answers `unsupported`, and the caller falls back to a
 * checked rename(2).
 *
 * `sys` is an object so a test can inject a fault at the exact point (sinon), e.g. swap the
 * target for a symlink between the last check and the rename.
 */
import { load, errno } from 'koffi';

const RENAME_NOREPLACE = 1;
const RENAME_EXCHANGE = 2;

type Renameat2 = (olddirfd: number, oldpath: string, newdirfd: number, newpath: string, flags: number) => number;

let renameat2: Renameat2 | null | undefined;

function bind(): Renameat2 | null {
  if (renameat2 !== undefined) return renameat2;
  try {
    const libc = load('libc.so.6');
    renameat2 = libc.func('int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned int flags)') as Renameat2;
  } catch {
    renameat2 = null;
  }
  return renameat2;
}

/** 'ok', an errno name the caller refuses on, or 'unsupported' (no renameat2 or no such flag here). */
export type RenameResult = 'ok' | 'EEXIST' | 'ENOENT' | 'unsupported' | { errno: number };

function call(dirfd: number, from: string, to: string, flags: number): RenameResult {
  const fn = bind();
  if (!fn) return 'unsupported';
  if (fn(dirfd, from, dirfd, to, flags) === 0) return 'ok';
  const e = errno();
  if (e === 17) return 'EEXIST';
  if (e === 2) return 'ENOENT';
  if (e === 22 || e === 38 || e === 95) return 'unsupported'; // EINVAL, ENOSYS, EOPNOTSUPP
  return { errno: e };
}

export const sys = {
  /** Renames `from` to `to` in the folder `dirfd`, only if `to` does not exist. */
  noReplace: (dirfd: number, from: string, to: string): RenameResult => call(dirfd, from, to, RENAME_NOREPLACE),
  /** Swaps the entries `a` and `b` of the folder `dirfd`; both must exist. */
  exchange: (dirfd: number, a: string, b: string): RenameResult => call(dirfd, a, b, RENAME_EXCHANGE),
};

/**
 * A small tmpfs the test mounts on a temporary folder, to fill with a file of its own: a full disk
 * under a store, without touching the machine's disks. Unmounted in teardown, also on failure.
 */
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync, writeSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Teardownable } from './netns.js';

export interface Tmpfs {
  dir: string;
  /** Writes a file of the test's own until the filesystem says ENOSPC. */
  fill(): void;
  /** Removes that file: the space is back. */
  free(): void;
}

/** Whether this process may mount (root). */
export function canMount(): boolean {
  return process.getuid?.() === 0;
}

/**
 * `before` runs in the teardown ahead of the unmount: close what holds files on it there (a store
 * open on it keeps the mount busy).
 */
export function tmpfs(t: Teardownable, sizeKiB: number, before: () => unknown = () => undefined): Tmpfs {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-tmpfs-'));
  execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${sizeKiB}k,mode=0700`, 'tmpfs', dir]);
  t.teardown(async () => {
    await before();
    try {
      execFileSync('umount', [dir], { stdio: 'pipe' });
    } catch {
      // Still busy (a child left running): detached now, gone when the last file on it closes.
      execFileSync('umount', ['-l', dir], { stdio: 'pipe' });
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const filler = join(dir, 'filler');
  return {
    dir,
    fill() {
      const fd = openSync(filler, 'a');
      const chunk = Buffer.alloc(64 * 1024, 0x2a);
      try {
        for (;;) {
          try {
            writeSync(fd, chunk);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
            break;
          }
        }
        // Less than a chunk is left: taken a page at a time.
        const small = Buffer.alloc(4096, 0x2a);
        for (;;) {
          try {
            writeSync(fd, small);
          } catch (e) {
            if ((e as NodeJS.ErrnoException).code !== 'ENOSPC') throw e;
            break;
          }
        }
      } finally {
        closeSync(fd);
      }
    },
    free() {
      rmSync(filler, { force: true });
    },
  };
}

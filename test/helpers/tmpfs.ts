/**
 * A tmpfs of the test's own, to fill: mounted on a folder the test made, unmounted in t.teardown
 * (and when the test process exits without its teardowns), so a full disk is a real ENOSPC from
 * the kernel under whatever writes there. The filler is a file of the test's own in it.
 */
import { spawnSync } from 'node:child_process';
import { closeSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Tmpfs {
  path: string;
  /** Writes the filler until the kernel answers ENOSPC; answers the bytes written. */
  fill(): number;
  /** Removes the filler: the space is back. */
  unfill(): void;
}

/** Whether this process may mount (root: CI runs the suite as root). */
export const canMount = (): boolean => process.getuid?.() === 0 && spawnSync('mount', ['--version']).status === 0;

export function mountTmpfs(t: Teardown, path: string, bytes: number): Tmpfs {
  mkdirSync(path, { recursive: true, mode: 0o700 });
  const r = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${bytes},mode=0700`, 'meshp-test-full', path], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`mount tmpfs on ${path}: ${r.stderr}`);
  // Lazy: a process still holding a file there (one the test failed to end) does not keep the mount.
  const umount = () => spawnSync('umount', ['-l', path]);
  t.teardown(umount);
  process.once('exit', umount);
  const filler = join(path, 'filler');
  return {
    path,
    fill() {
      const fd = openSync(filler, 'a');
      let written = 0;
      try {
        // Big chunks first, then smaller, down to one byte: nothing is left for anyone.
        for (let size = 1 << 20; size >= 1; size >>= 4) {
          const chunk = Buffer.alloc(size);
          for (;;) {
            try {
              written += writeSync(fd, chunk);
            } catch (e) {
              if ((e as NodeJS.ErrnoException).code === 'ENOSPC') break;
              throw e;
            }
          }
        }
      } finally {
        closeSync(fd);
      }
      return written;
    },
    unfill() {
      rmSync(filler, { force: true });
    },
  };
}

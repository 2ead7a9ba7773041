/**
 * Declared files on the local filesystem under a root prefix, by identity, not by path.
 *
 * Every declared path is walked from the root one folder at a time without following a symlink
 * (beneath.ts): a symlink anywhere on the way, or at the file itself, is refused, never followed.
 * Only regular files are read, opened non-blocking (a FIFO cannot hang the host) and up to a size
 * limit. A write goes to a temp file made exclusively in the same folder, and is put at the target
 * only if the target is still the file the plan saw (device and inode), decided by the kernel
 * (renameat2, rename.ts), so a swap between the last check and the write cannot slip through. A
 * removal takes the entry aside, checks it, and unlinks it: never what a link points to.
 */
import { randomBytes } from 'node:crypto';
import { constants, promises as fs, type BigIntStats } from 'node:fs';
import { resolve } from 'node:path';
import { MeshpError, type FileStat, type FileStore, type FileWriteOptions } from '@meshp/core';
import { at, identityOf, lstatAt, refusal, walk, type Dir, type Walk } from './beneath.js';
import { sys } from './rename.js';

/** 16 MiB: a configuration file, not a disk image. */
export const DEFAULT_MAX_FILE_BYTES = 16 * 1024 * 1024;

const READ_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const TEMP_FLAGS = constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW;

export interface LocalFileStoreOptions {
  /** Files larger than this are refused (MESHP_FILE_TOO_LARGE), never read. */
  maxFileBytes?: number;
}

export class LocalFileStore implements FileStore {
  readonly root: string;
  readonly maxFileBytes: number;

  constructor(root: string, options: LocalFileStoreOptions = {}) {
    this.root = resolve(root);
    this.maxFileBytes = options.maxFileBytes ?? DEFAULT_MAX_FILE_BYTES;
  }

  private async withWalk<T>(path: string, create: boolean, fn: (w: Walk) => Promise<T>): Promise<T | null> {
    const w = await walk(this.root, path, create);
    if (!w) return null;
    try {
      return await fn(w);
    } finally {
      await w.dir.close();
    }
  }

  /** The entry at the end of the walk, refused unless absent or a regular file. */
  private async regular(w: Walk, path: string): Promise<BigIntStats | null> {
    const st = await lstatAt(w.dir, w.name);
    if (st && !st.isFile()) throw await refusal(w.dir, w.name, st, path, w.machinePath, this.root);
    return st;
  }

  private tooLarge(path: string, size: bigint | number | string): MeshpError {
    return new MeshpError('MESHP_FILE_TOO_LARGE', `${path} holds ${size} bytes, over the limit of ${this.maxFileBytes}`);
  }

  async read(path: string): Promise<FileStat | null> {
    return this.withWalk(path, false, async (w) => {
      const st = await this.regular(w, path);
      if (!st) return null;
      if (st.size > BigInt(this.maxFileBytes)) throw this.tooLarge(path, st.size);
      let handle: fs.FileHandle;
      try {
        handle = await fs.open(at(w.dir, w.name), READ_FLAGS);
      } catch (e) {
        const code = (e as NodeJS.ErrnoException).code;
        if (code === 'ENOENT') return null;
        throw new MeshpError('MESHP_PATH_INVALID', `cannot read ${path}: ${code ?? String(e)}`, { cause: e });
      }
      try {
        const opened = await handle.stat({ bigint: true });
        if (!opened.isFile() || identityOf(opened) !== identityOf(st)) {
          throw new MeshpError('MESHP_FILE_SWAPPED', `${path} was replaced while it was being read`);
        }
        // Read at most one byte past the limit: a file that grew meanwhile is still refused.
        const buffer = Buffer.alloc(Math.min(Number(opened.size), this.maxFileBytes) + 1);
        let length = 0;
        for (;;) {
          const { bytesRead } = await handle.read(buffer, length, buffer.length - length, length);
          if (bytesRead === 0) break;
          length += bytesRead;
          if (length > this.maxFileBytes) throw this.tooLarge(path, `more than ${this.maxFileBytes}`);
          if (length === buffer.length) break;
        }
        return {
          bytes: new Uint8Array(buffer.subarray(0, length)),
          mode: Number(opened.mode) & 0o7777,
          identity: identityOf(opened),
          uid: Number(opened.uid),
          gid: Number(opened.gid),
        };
      } finally {
        await handle.close();
      }
    });
  }

  /** Refuses a target that is no longer what the plan saw: absent (null) or this identity. */
  private checkExpected(path: string, st: BigIntStats | null, expect: string | null | undefined): void {
    if (expect === undefined) return;
    const now = st ? identityOf(st) : null;
    if (now !== expect) {
      const was = expect === null ? 'absent' : `file ${expect}`;
      const is = now === null ? 'absent' : `file ${now}`;
      throw new MeshpError('MESHP_FILE_SWAPPED', `${path} changed since the plan saw it (${was}, now ${is}); not written`);
    }
  }

  async write(path: string, bytes: Uint8Array, mode: number, options: FileWriteOptions = {}): Promise<string> {
    const identity = await this.withWalk(path, true, async (w) => {
      const seen = await this.regular(w, path);
      this.checkExpected(path, seen, options.expect);
      // What the write may replace: what the plan saw, else what the walk saw just now.
      const expect = options.expect !== undefined ? options.expect : seen ? identityOf(seen) : null;
      const temp = tempName('tmp');
      const handle = await fs.open(at(w.dir, temp), TEMP_FLAGS, mode & 0o7777);
      let mine: string;
      try {
        await handle.writeFile(bytes);
        // The owner first: chown clears the set-id bits, which the chmod after it puts back.
        if (options.owner) await handle.chown(options.owner.uid, options.owner.gid);
        await handle.chmod(mode & 0o7777);
        await handle.sync();
        mine = identityOf(await handle.stat({ bigint: true }));
      } catch (e) {
        await handle.close();
        await fs.unlink(at(w.dir, temp)).catch(() => undefined);
        throw e;
      }
      await handle.close();
      try {
        await this.place(w, path, temp, expect);
      } catch (e) {
        await dropIfMine(w.dir, temp, mine);
        throw e;
      }
      await w.dir.sync();
      return mine;
    });
    if (identity === null) throw new MeshpError('MESHP_PATH_INVALID', `cannot make the folders of ${path}`);
    return identity;
  }

  /**
   * Puts the temp file at the declared name only if the name still holds `expect` (null: nothing).
   * The kernel decides, not an earlier lstat: RENAME_NOREPLACE for a new file, RENAME_EXCHANGE
   * then a look at what was replaced, swapped back when it is not what the plan saw.
   */
  private async place(w: Walk, path: string, temp: string, expect: string | null): Promise<void> {
    const fd = w.dir.fd;
    const r = expect === null ? sys.noReplace(fd, temp, w.name) : sys.exchange(fd, temp, w.name);
    if (r === 'unsupported') return this.checkedRename(w, path, temp, expect);
    if (r === 'EEXIST') throw swapped(path, expect, 'something was made there');
    if (r === 'ENOENT') throw swapped(path, expect, 'it is gone');
    if (r !== 'ok') throw new MeshpError('MESHP_PATH_INVALID', `cannot write ${path}: errno ${r.errno}`);
    if (expect === null) return;
    // The temp name now holds the entry that was at the declared path until the exchange.
    const replaced = await lstatAt(w.dir, temp);
    if (replaced && replaced.isFile() && identityOf(replaced) === expect) {
      await fs.unlink(at(w.dir, temp)).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT') throw e;
      });
      return;
    }
    // Not what the plan saw: swapped back, so the entry found stays where it was, untouched.
    const back = sys.exchange(fd, temp, w.name);
    const found = replaced ? describe(replaced) : 'nothing';
    if (back !== 'ok') {
      throw new MeshpError(
        'MESHP_FILE_SWAPPED',
        `${path} was replaced by ${found} just before the write, and could not be put back (${JSON.stringify(back)}); it is kept as ${temp} beside it`,
      );
    }
    throw swapped(path, expect, `${found} was there at the write; put back as found, not written`);
  }

  /** Where renameat2 has no such flag: the last check as late as possible, then rename(2). */
  private async checkedRename(w: Walk, path: string, temp: string, expect: string | null): Promise<void> {
    this.checkExpected(path, await this.regular(w, path), expect);
    await fs.rename(at(w.dir, temp), at(w.dir, w.name));
  }

  async remove(path: string, options: FileWriteOptions = {}): Promise<void> {
    await this.withWalk(path, false, async (w) => {
      const st = await this.regular(w, path);
      if (!st) return;
      this.checkExpected(path, st, options.expect);
      const expect = options.expect ?? identityOf(st);
      // Taken aside first (the kernel moves whatever entry is there), looked at, then removed:
      // unlink(2) removes an entry itself, never what a link points to.
      const aside = tempName('rm');
      const r = sys.noReplace(w.dir.fd, w.name, aside);
      if (r === 'ENOENT') return;
      if (r === 'unsupported') {
        await fs.unlink(at(w.dir, w.name)).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'ENOENT') throw e;
        });
      } else if (r !== 'ok') {
        throw new MeshpError('MESHP_PATH_INVALID', `cannot remove ${path}: ${JSON.stringify(r)}`);
      } else {
        const taken = await lstatAt(w.dir, aside);
        if (!taken || !taken.isFile() || identityOf(taken) !== expect) {
          const found = taken ? describe(taken) : 'nothing';
          const back = sys.noReplace(w.dir.fd, aside, w.name);
          const where = back === 'ok' ? 'put back as found' : `kept as ${aside} beside it, since the path was made again meanwhile`;
          throw swapped(path, expect, `${found} was there at the removal; ${where}, not removed`);
        }
        await fs.unlink(at(w.dir, aside));
      }
      await w.dir.sync();
    });
  }
}

const tempName = (what: string) => `.${randomBytes(6).toString('hex')}.meshp-${what}`;

function describe(st: BigIntStats): string {
  if (st.isSymbolicLink()) return 'a symlink';
  if (st.isFile()) return `file ${identityOf(st)}`;
  if (st.isDirectory()) return 'a directory';
  return 'a special file';
}

function swapped(path: string, expect: string | null, what: string): MeshpError {
  const was = expect === null ? 'absent' : `file ${expect}`;
  return new MeshpError('MESHP_FILE_SWAPPED', `${path} changed since the plan saw it (${was}): ${what}`);
}

/** Removes the temp file after a failure, only if the name still holds the file meshp wrote. */
async function dropIfMine(dir: Dir, temp: string, mine: string): Promise<void> {
  const st = await lstatAt(dir, temp).catch(() => null);
  if (st && identityOf(st) === mine) await fs.unlink(at(dir, temp)).catch(() => undefined);
}

/**
 * Declared files on the local filesystem under a root prefix, by identity, not by path.
 *
 * Every declared path is walked from the root one folder at a time without following a symlink
 * (beneath.ts): a symlink anywhere on the way, or at the file itself, is refused, never followed.
 * Only regular files are read, opened non-blocking (a FIFO cannot hang the host) and up to a size
 * limit. A write goes to a temp file made exclusively in the same folder, and is renamed over the
 * target only if the target is still the file the plan saw (device and inode). A removal unlinks
 * the directory entry, never what a link points to.
 */
import { randomBytes } from 'node:crypto';
import { constants, promises as fs, type BigIntStats } from 'node:fs';
import { resolve } from 'node:path';
import { MeshpError, type FileStat, type FileStore, type FileWriteOptions } from '@meshp/core';
import { at, identityOf, lstatAt, refusal, walk, type Walk } from './beneath.js';

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
        return { bytes: new Uint8Array(buffer.subarray(0, length)), mode: Number(opened.mode) & 0o7777, identity: identityOf(opened) };
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
      this.checkExpected(path, await this.regular(w, path), options.expect);
      const temp = `.${randomBytes(6).toString('hex')}.meshp-tmp`;
      const handle = await fs.open(at(w.dir, temp), TEMP_FLAGS, mode & 0o7777);
      let written: BigIntStats;
      try {
        await handle.writeFile(bytes);
        await handle.chmod(mode & 0o7777);
        await handle.sync();
        written = await handle.stat({ bigint: true });
      } catch (e) {
        await handle.close();
        await fs.unlink(at(w.dir, temp)).catch(() => undefined);
        throw e;
      }
      await handle.close();
      try {
        // Checked again as late as possible: the window left is between this lstat and rename(2).
        this.checkExpected(path, await this.regular(w, path), options.expect);
        await fs.rename(at(w.dir, temp), at(w.dir, w.name));
      } catch (e) {
        await fs.unlink(at(w.dir, temp)).catch(() => undefined);
        throw e;
      }
      await w.dir.sync();
      return identityOf(written);
    });
    if (identity === null) throw new MeshpError('MESHP_PATH_INVALID', `cannot make the folders of ${path}`);
    return identity;
  }

  async remove(path: string, options: FileWriteOptions = {}): Promise<void> {
    await this.withWalk(path, false, async (w) => {
      const st = await this.regular(w, path);
      if (!st) return;
      this.checkExpected(path, st, options.expect);
      // unlink(2) removes the entry itself; it never reaches what a link points to.
      await fs.unlink(at(w.dir, w.name)).catch((e: NodeJS.ErrnoException) => {
        if (e.code !== 'ENOENT') throw e;
      });
      await w.dir.sync();
    });
  }
}

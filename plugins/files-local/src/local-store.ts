/**
 * Declared files on the local filesystem under a root prefix. Every path is resolved against the
 * root with its symlinks followed; a path that lands outside the root is refused before any byte
 * is written. Writes are atomic: temp file in the same folder, fsync, rename, fsync of the folder.
 */
import { randomBytes } from 'node:crypto';
import { constants, promises as fs } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { MeshpError, type FileStat, type FileStore } from '@meshp/core';

function escapes(root: string, real: string): boolean {
  const rel = relative(root, real);
  return rel === '..' || rel.startsWith(`..${sep}`) || resolve(root, rel) !== real;
}

export class LocalFileStore implements FileStore {
  readonly root: string;
  #realRoot?: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  private async realRoot(): Promise<string> {
    this.#realRoot ??= await fs.realpath(this.root).catch(() => this.root);
    return this.#realRoot;
  }

  /**
   * The absolute path on the machine for a declared path. Follows every symlink on the way, as far
   * as the path exists, and refuses one that leads out of the root.
   */
  async resolve(path: string): Promise<string> {
    if (typeof path !== 'string' || !path.startsWith('/') || path.includes('\0')) {
      throw new MeshpError('MESHP_PATH_INVALID', `not an absolute path: ${JSON.stringify(path)}`);
    }
    const root = await this.realRoot();
    const segments = path.split('/').filter((s) => s !== '');
    if (segments.some((s) => s === '..' || s === '.')) {
      throw new MeshpError('MESHP_PATH_ESCAPES_ROOT', `${path} has a "." or ".." segment`);
    }
    let current = root;
    for (const [i, segment] of segments.entries()) {
      const next = join(current, segment);
      let real: string;
      try {
        real = await fs.realpath(next);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
        // Is it a dangling symlink? Its target may be outside the root.
        const link = await fs.readlink(next).catch(() => null);
        if (link !== null) {
          const target = resolve(dirname(next), link);
          if (escapes(root, target)) throw new MeshpError('MESHP_PATH_ESCAPES_ROOT', `${path} leads out of the root ${this.root} through a symlink`);
        }
        return join(current, ...segments.slice(i));
      }
      if (escapes(root, real)) {
        throw new MeshpError('MESHP_PATH_ESCAPES_ROOT', `${path} leads out of the root ${this.root} through a symlink`);
      }
      current = real;
    }
    return current;
  }

  async read(path: string): Promise<FileStat | null> {
    const real = await this.resolve(path);
    try {
      const [bytes, stat] = await Promise.all([fs.readFile(real), fs.stat(real)]);
      return { bytes: new Uint8Array(bytes), mode: stat.mode & 0o7777 };
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return null;
      throw new MeshpError('MESHP_PATH_INVALID', `cannot read ${path}: ${code ?? String(e)}`, { cause: e });
    }
  }

  async write(path: string, bytes: Uint8Array, mode: number): Promise<void> {
    const real = await this.resolve(path);
    const dir = dirname(real);
    await fs.mkdir(dir, { recursive: true, mode: 0o755 });
    // The folder may have been created through a symlink made meanwhile: check again.
    await this.resolve(path);
    const temp = join(dir, `.${randomBytes(6).toString('hex')}.meshp-tmp`);
    const handle = await fs.open(temp, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY, mode & 0o7777);
    try {
      await handle.writeFile(bytes);
      await handle.chmod(mode & 0o7777);
      await handle.sync();
    } catch (e) {
      await handle.close();
      await fs.rm(temp, { force: true });
      throw e;
    }
    await handle.close();
    try {
      await fs.rename(temp, real);
    } catch (e) {
      await fs.rm(temp, { force: true });
      throw e;
    }
    const dirHandle = await fs.open(dir, 'r');
    try {
      await dirHandle.sync();
    } finally {
      await dirHandle.close();
    }
  }

  async remove(path: string): Promise<void> {
    const real = await this.resolve(path);
    await fs.rm(real, { force: true });
  }
}

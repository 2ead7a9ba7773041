/**
 * Walking a declared path beneath the root without following a symlink anywhere.
 *
 * Node has no openat(2). A path `/proc/self/fd/<dirfd>/<name>` does the same job: the kernel
 * resolves the magic link `/proc/self/fd/<dirfd>` to the open directory itself (not to its name,
 * so a rename or a swapped parent cannot redirect it), then looks `<name>` up inside it. With
 * O_NOFOLLOW on the last component, and lstat/rename/unlink/mkdir (which never follow a last
 * component), every step is relative to a directory already opened without following a link.
 */
import { constants, existsSync, promises as fs, type BigIntStats } from 'node:fs';
import { dirname, resolve, sep } from 'node:path';
import { MeshpError } from '@meshp/core';

const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

export type Dir = fs.FileHandle;

let procChecked: boolean | undefined;

/** The path through which a name inside an open directory is reached. */
export function at(dir: Dir, name: string): string {
  return `/proc/self/fd/${dir.fd}/${name}`;
}

export function identityOf(st: BigIntStats): string {
  return `${st.dev}:${st.ino}`;
}

export function segmentsOf(path: string): string[] {
  if (typeof path !== 'string' || !path.startsWith('/') || path.includes('\0')) {
    throw new MeshpError('MESHP_PATH_INVALID', `not an absolute path: ${JSON.stringify(path)}`);
  }
  const segments = path.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '..' || s === '.')) {
    throw new MeshpError('MESHP_PATH_ESCAPES_ROOT', `${path} has a "." or ".." segment`);
  }
  if (segments.length === 0) throw new MeshpError('MESHP_PATH_INVALID', `${path} names the root itself, not a file`);
  return segments;
}

export async function lstatAt(dir: Dir, name: string): Promise<BigIntStats | null> {
  try {
    return await fs.lstat(at(dir, name), { bigint: true });
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw e;
  }
}

function kindOf(st: BigIntStats): string {
  if (st.isSymbolicLink()) return 'a symlink';
  if (st.isDirectory()) return 'a directory';
  if (st.isFIFO()) return 'a FIFO';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'not a regular file';
}

/**
 * The refusal for an entry that is not what a step needs. A symlink whose target, read as text,
 * lies outside the root refuses the whole apply (MESHP_PATH_ESCAPES_ROOT); any other symlink is
 * MESHP_PATH_SYMLINK: it is never followed, wherever it points.
 */
export async function refusal(dir: Dir, name: string, st: BigIntStats, path: string, machinePath: string, root: string): Promise<MeshpError> {
  if (st.isSymbolicLink()) {
    const target = await fs.readlink(at(dir, name)).catch(() => '');
    // Where the kernel would land, read as text (absolute targets are the machine's, not the root's).
    const landing = resolve(dirname(machinePath), target);
    const inside = landing === root || landing.startsWith(root === '/' ? '/' : `${root}${sep}`);
    if (!inside) return new MeshpError('MESHP_PATH_ESCAPES_ROOT', `${path} leads out of the root ${root} through a symlink`);
    return new MeshpError('MESHP_PATH_SYMLINK', `${path}: ${machinePath} is a symlink; meshp never follows one`);
  }
  return new MeshpError('MESHP_FILE_NOT_REGULAR', `${path}: ${machinePath} is ${kindOf(st)}`);
}

export interface Walk {
  /** The directory holding the last component, open; the caller closes it. */
  dir: Dir;
  name: string;
  /** The last component's path on the machine, for messages. */
  machinePath: string;
}

/** The mode of every folder meshp makes on the way to a declared file, whatever the umask. */
export const FOLDER_MODE = 0o755;

/**
 * Opens each folder of `path` in turn from the root, never following a symlink. Absent folders
 * are made (FOLDER_MODE, 0755, whatever the umask) when `create`, else the walk answers null.
 */
export async function walk(root: string, path: string, create: boolean): Promise<Walk | null> {
  const segments = segmentsOf(path);
  // Without /proc every lookup would answer ENOENT and a present file would be taken for absent.
  procChecked ??= existsSync('/proc/self/fd');
  if (!procChecked)
    throw new MeshpError('MESHP_PROVIDER_MISSING', 'files-local needs /proc mounted (it opens paths relative to open folders through /proc/self/fd)');
  // The root is the operator's: opened as given (it may itself be reached through a symlink).
  let dir: Dir;
  try {
    dir = await fs.open(root, constants.O_RDONLY | constants.O_DIRECTORY);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
    if (!create) return null;
    await fs.mkdir(root, { recursive: true, mode: 0o755 });
    dir = await fs.open(root, constants.O_RDONLY | constants.O_DIRECTORY);
  }
  let machinePath = root;
  try {
    for (const segment of segments.slice(0, -1)) {
      machinePath = resolve(machinePath, segment);
      let next: Dir | null = null;
      let made = false;
      for (let attempt = 0; next === null; attempt += 1) {
        try {
          next = await fs.open(at(dir, segment), DIR_FLAGS);
        } catch (e) {
          const code = (e as NodeJS.ErrnoException).code;
          if (code === 'ENOENT' && create && attempt < 3) {
            made = await fs.mkdir(at(dir, segment), { mode: FOLDER_MODE }).then(
              () => true,
              (m: NodeJS.ErrnoException) => {
                if (m.code !== 'EEXIST') throw m;
                return false;
              },
            );
            continue;
          }
          if (code === 'ENOENT') {
            await dir.close();
            return null;
          }
          const st = await lstatAt(dir, segment);
          if (st && (code === 'ELOOP' || code === 'ENOTDIR')) throw await refusal(dir, segment, st, path, machinePath, root);
          throw new MeshpError('MESHP_PATH_INVALID', `cannot open ${machinePath}: ${code ?? String(e)}`, { cause: e });
        }
      }
      // mkdir's mode is cut by the process umask (the shipped unit's UMask=0077 would make 0700
      // folders whose files nobody else can reach): a folder meshp made is set to FOLDER_MODE
      // through the handle it opened. A folder it found keeps its mode.
      if (made)
        await next.chmod(FOLDER_MODE).catch(async (e: unknown) => {
          await next.close();
          throw e;
        });
      await dir.close();
      dir = next;
    }
  } catch (e) {
    await dir.close();
    throw e;
  }
  return { dir, name: segments.at(-1)!, machinePath: resolve(machinePath, segments.at(-1)!) };
}

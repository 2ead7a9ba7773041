/**
 * State folders hold secrets (an agent's credential, the originals of held files, catalogue
 * contents): the folder is 0700 and its database files 0600, whatever existed before.
 *
 * What was found only too readable is tightened, and the caller says so in its output: the
 * secrets may have been read, but what the folder holds is still meshp's own. What others could
 * have written is refused (MESHP_STATE_UNSAFE), never tightened and used: a folder writable by
 * group or others, or owned by another user (who can widen it again), may hold a planted file or
 * link that cannot be told from meshp's own; a database file that is a symlink, not a regular
 * file, another user's, or hard-linked elsewhere would have meshp chmod and write another file.
 */
import { chmodSync, closeSync, constants, lstatSync, mkdirSync, openSync, statSync, type Stats } from 'node:fs';
import { MeshpError } from '@meshp/core';

const oct = (m: number) => (m & 0o7777).toString(8).padStart(4, '0');

const unsafe = (what: string, fix: string) => new MeshpError('MESHP_STATE_UNSAFE', `${what}: refused, not used (${fix})`);

function ownerCheck(path: string, st: Stats, what: string): void {
  const me = process.geteuid?.();
  if (me !== undefined && st.uid !== me) {
    throw unsafe(
      `${what} ${path} belongs to uid ${st.uid}, not to this user (uid ${me}), who could widen it again`,
      'give it to this user, or choose another --state',
    );
  }
}

/** Makes `dir` (0700) or tightens it; answers a line for the output when it was wider, else null. */
export function privateDir(dir: string): string | null {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (st.isSymbolicLink()) throw unsafe(`state folder ${dir} is a symlink`, 'give the folder itself');
  if (!st.isDirectory()) throw new MeshpError('MESHP_PATH_INVALID', `state folder ${dir} is not a folder`);
  ownerCheck(dir, st, 'state folder');
  if ((st.mode & 0o022) !== 0) {
    throw unsafe(`state folder ${dir} has mode ${oct(st.mode)}: others could have put files or links in it`, `check what it holds, then chmod 0700 ${dir}`);
  }
  if ((st.mode & 0o077) === 0) return null;
  chmodSync(dir, 0o700);
  return `state folder ${dir} had mode ${oct(st.mode)}; tightened to 0700 (it holds secrets)`;
}

/**
 * An SQLite file and its companions (-wal, -shm, -journal) at 0600. Called before the database is
 * opened (the file is created 0600, so SQLite makes its companions with the same mode) and after
 * (companions left wider by an earlier version are tightened). Answers lines for the output.
 */
export function privateDbFiles(file: string): string[] {
  try {
    // Made exclusively and never through a link: whatever is already there is looked at below.
    closeSync(openSync(file, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | constants.O_NOFOLLOW, 0o600));
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
  }
  const said: string[] = [];
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    let st: Stats;
    try {
      st = lstatSync(f);
    } catch {
      continue;
    }
    if (st.isSymbolicLink()) throw unsafe(`${f} is a symlink`, 'remove the link; meshp never writes through one');
    if (!st.isFile()) throw unsafe(`${f} is not a regular file`, 'remove it');
    ownerCheck(f, st, 'state file');
    if (st.nlink > 1) throw unsafe(`${f} has ${st.nlink} names (a hard link)`, 'remove the other names, or the file');
    if ((st.mode & 0o7777) === 0o600) continue;
    chmodSync(f, 0o600);
    said.push(`${f} had mode ${oct(st.mode)}; tightened to 0600`);
  }
  return said;
}

/**
 * A file that names code meshp runs (a config's plugin list): refused (MESHP_STATE_UNSAFE) when
 * anyone but its owner could write it, or its owner is neither this user nor root. It is followed
 * if a link (a config may live elsewhere), and what it reaches is checked.
 */
export function trustedFile(file: string, what: string): void {
  const st = statSync(file);
  const me = process.geteuid?.();
  if (me !== undefined && st.uid !== me && st.uid !== 0) {
    throw unsafe(`${what} ${file} belongs to uid ${st.uid}, neither this user nor root, and names code meshp runs`, `give it to root, or to this user`);
  }
  if ((st.mode & 0o022) !== 0) {
    throw unsafe(`${what} ${file} has mode ${oct(st.mode)}: others could change the code it makes meshp run`, `chmod go-w ${file}`);
  }
}

/** Says on stderr what was tightened: stdout may be a JSON document or a JSON log. */
export function sayTightened(lines: (string | null)[]): void {
  for (const l of lines) if (l) process.stderr.write(`meshp: ${l}\n`);
}

/**
 * State folders hold secrets (an agent's credential, the originals of held files, catalogue
 * contents): the folder is 0700 and its database files 0600, whatever existed before. A folder
 * found wider is tightened, and the caller says so in its output.
 */
import { chmodSync, closeSync, existsSync, lstatSync, mkdirSync, openSync } from 'node:fs';
import { MeshpError } from './errors.js';

const oct = (m: number) => (m & 0o7777).toString(8).padStart(4, '0');

/** Makes `dir` (0700) or tightens it; answers a line for the output when it was wider, else null. */
export function privateDir(dir: string): string | null {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = lstatSync(dir);
  if (!st.isDirectory()) throw new MeshpError('MESHP_PATH_INVALID', `state folder ${dir} is not a folder`);
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
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600));
  const said: string[] = [];
  for (const f of [file, `${file}-wal`, `${file}-shm`, `${file}-journal`]) {
    let mode: number;
    try {
      mode = lstatSync(f).mode;
    } catch {
      continue;
    }
    if ((mode & 0o7777) === 0o600) continue;
    chmodSync(f, 0o600);
    said.push(`${f} had mode ${oct(mode)}; tightened to 0600`);
  }
  return said;
}

/** Says on stderr what was tightened: stdout may be a JSON document or a JSON log. */
export function sayTightened(lines: (string | null)[]): void {
  for (const l of lines) if (l) process.stderr.write(`meshp: ${l}\n`);
}

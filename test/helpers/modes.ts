/** Secrets stay private: a state folder 0700, and its database files (with -wal/-shm) 0600. */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

import type { Subtest } from './tap-types.js';

const mode = (p: string) => (statSync(p).mode & 0o7777).toString(8).padStart(4, '0');

const dbFiles = (dir: string) => readdirSync(dir).filter((f) => /\.db(-wal|-shm|-journal)?$/.test(f));

/** Asserts the folder is 0700 and every *.db file in it, and its companions, 0600. */
export function assertPrivate(t: Subtest, dir: string): void {
  t.equal(mode(dir), '0700', `${dir} is 0700`);
  const dbs = dbFiles(dir);
  t.equal(
    dbs.some((f) => f.endsWith('.db')),
    true,
    `${dir} holds a database`,
  );
  for (const f of dbs) if (existsSync(join(dir, f))) t.equal(mode(join(dir, f)), '0600', `${f} is 0600`);
}

/**
 * What is wider than private in a state folder a process made ('' when all is well, and when the
 * folder was never made). For the process helpers, which check every controller and agent they ran.
 */
export function widerThanPrivate(dir: string): string {
  if (!existsSync(dir)) return '';
  const wide = [[dir, mode(dir), '0700']];
  for (const f of dbFiles(dir)) if (existsSync(join(dir, f))) wide.push([join(dir, f), mode(join(dir, f)), '0600']);
  return wide
    .filter(([, m, want]) => m !== want)
    .map(([p, m, want]) => `${p} is ${m}, not ${want}`)
    .join('; ');
}

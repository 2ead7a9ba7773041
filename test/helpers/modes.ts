/** Secrets stay private: a state folder 0700, and its database files (with -wal/-shm) 0600. */
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

import type { Subtest } from './tap-types.js';

const mode = (p: string) => (statSync(p).mode & 0o7777).toString(8).padStart(4, '0');

/** Asserts the folder is 0700 and every *.db file in it, and its companions, 0600. */
export function assertPrivate(t: Subtest, dir: string): void {
  t.equal(mode(dir), '0700', `${dir} is 0700`);
  const dbs = readdirSync(dir).filter((f) => /\.db(-wal|-shm|-journal)?$/.test(f));
  t.equal(dbs.some((f) => f.endsWith('.db')), true, `${dir} holds a database`);
  for (const f of dbs) if (existsSync(join(dir, f))) t.equal(mode(join(dir, f)), '0600', `${f} is 0600`);
}

// What the host store's quick_check at open costs (issue 24): a host.db with N originals of S bytes
// each (default 10,000 of 1 KiB and of 4 KiB), opened through the real SqliteHostStore (WAL,
// synchronous=FULL, quick_check(3), schema), beside the same open without the check in the same run
// (the baseline: the pragmas and the schema alone). quick_check's N bounds the rows it answers, not
// its work: it reads every b-tree page, so the cost follows the file's size. The file is in the page
// cache (it was just written): a first open after a reboot reads it from the disk as well.
//
// Run after `make build`: node bench/host-store-open.bench.mjs [originals, default 10000] [sizes, default 1024,4096] [rounds, default 9]
import Database from 'better-sqlite3';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SqliteHostStore } from '@meshp/state-sqlite';

const n = Number(process.argv[2] ?? 10000);
const sizes = (process.argv[3] ?? '1024,4096').split(',').map(Number);
const rounds = Number(process.argv[4] ?? 9);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function fill(dir, size) {
  const s = new SqliteHostStore(dir);
  const at = new Date().toISOString();
  for (let i = 0; i < n; i++) {
    await s.recordOriginal({
      key: `file:/etc/found/${i}.conf`,
      kind: 'file',
      module: `m${i % 50}`,
      original: Buffer.alloc(size, i & 255),
      fingerprint: 'f'.repeat(64),
      foundAt: at,
      lastFingerprint: 'f'.repeat(64),
      changedAt: null,
      identity: `2049:${1000 + i}`,
    });
  }
  await s.close();
}

/** The open without the check: what SqliteHostStore did before it ran quick_check. */
function openUnchecked(file) {
  const db = new Database(file, { timeout: 5000 });
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = FULL');
  db.exec('CREATE TABLE IF NOT EXISTS owned (key TEXT PRIMARY KEY, kind TEXT NOT NULL, module TEXT NOT NULL, digest TEXT NOT NULL, at TEXT NOT NULL)');
  db.pragma('user_version', { simple: true });
  db.close();
}

console.log(`host.db open with ${n} originals: median of ${rounds} opens, ms (warm page cache)`);
console.log('original  file MiB   open, checked   open, unchecked   quick_check alone   ratio');
for (const size of sizes) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-open-bench-'));
  await fill(dir, size);
  const file = join(dir, 'host.db');
  const checked = [];
  const unchecked = [];
  const check = [];
  for (let r = 0; r < rounds; r++) {
    let t0 = performance.now();
    await new SqliteHostStore(dir).close();
    checked.push(performance.now() - t0);
    t0 = performance.now();
    openUnchecked(file);
    unchecked.push(performance.now() - t0);
    const db = new Database(file);
    t0 = performance.now();
    db.pragma('quick_check(3)');
    check.push(performance.now() - t0);
    db.close();
  }
  const mib = statSync(file).size / 1048576;
  const c = median(checked);
  const u = median(unchecked);
  console.log(
    `${String(size).padEnd(9)} ${mib.toFixed(1).padStart(8)}   ${c.toFixed(2).padStart(13)}   ${u.toFixed(2).padStart(15)}   ${median(check).toFixed(2).padStart(17)}   ${(c / u).toFixed(1).padStart(5)}`,
  );
  rmSync(dir, { recursive: true, force: true });
}

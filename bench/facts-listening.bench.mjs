// facts-proc's listening sockets with their holders, read on every reconcile (issue: the suite's and
// a busy server's cost). The baseline, in the same run: every read scans every fd of every process
// (one readlink per open fd on the machine). Now: a holder is remembered by socket inode and
// re-checked in its one process. Ratio = baseline / remembered (higher is better).
//
// Run after `make build`: node bench/facts-listening.bench.mjs [reads, default 50]
import { listening } from '@meshp/facts-proc';
import { readdirSync } from 'node:fs';

const reads = Number(process.argv[2] ?? 50);
const fds = readdirSync('/proc')
  .filter((d) => /^\d+$/.test(d))
  .reduce((n, pid) => {
    try {
      return n + readdirSync(`/proc/${pid}/fd`).length;
    } catch {
      return n;
    }
  }, 0);

async function time(rescan) {
  await listening({ rescan: true });
  const t0 = performance.now();
  for (let i = 0; i < reads; i++) await listening({ rescan });
  return (performance.now() - t0) / reads;
}

const listeners = (await listening()).length;
const base = await time(true);
const now = await time(false);
console.log(`machine: ${fds} open fds, ${listeners} listening sockets; ${reads} reads each`);
console.log(`baseline (scan every fd)   ${base.toFixed(2)} ms per read`);
console.log(`remembered holders         ${now.toFixed(2)} ms per read`);
console.log(`ratio baseline/remembered  ${(base / now).toFixed(1)}x`);

// The agent's cost per change (issue 15): a one-peer delta applied (core's DeltaApplier) and
// persisted (core's persistView into the real state-sqlite host store, synchronous=FULL), at 1k and
// at 50k peers, end to end; the goal is 50k ≤ 1.5 × 1k. Printed beside it, in the same run, the
// former way: the whole view written as one record on every delta (the baseline).
//
// Run after `make build`: node bench/agent-persist.bench.mjs [sizes, default 1000,50000] [deltas per size, default 200]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VIEW_KEY, persistView } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { SqliteHostStore } from '@meshp/state-sqlite';

const sizes = (process.argv[2] ?? '1000,50000').split(',').map(Number);
const rounds = Number(process.argv[3] ?? 200);
const peer = (i, gen = 0) => ({
  id: `p${i}`,
  nodeKey: `key-${i}-${gen}`,
  addresses: [`100.${64 + (i >> 16)}.${(i >> 8) & 255}.${i & 255}`],
  tags: ['g'],
  endpoints: [`198.51.100.${i & 255}:51820`],
  inboundOnly: false,
});

async function measure(n, k, whole) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-persist-'));
  const store = new SqliteHostStore(dir);
  const a = new DeltaApplier();
  const snap = a.receive({ fromVersion: 0, toVersion: 1, network: 'n', upsertPeers: Array.from({ length: n }, (_, i) => peer(i)), removePeers: [] });
  await persistView(store, a.view, null, {});
  const times = [];
  for (let r = 0; r < k; r++) {
    const v = a.appliedVersion;
    const t0 = performance.now();
    const res = a.receive({ fromVersion: v, toVersion: v + 1, network: 'n', upsertPeers: [peer(r % n, r + 1)], removePeers: [] });
    if (whole) {
      await store.setValue(VIEW_KEY, a.view.toSnapshot());
      await store.setValue('agent.recent', a.recent);
    } else await persistView(store, a.view, res.change, { 'agent.recent': a.recent });
    times.push(performance.now() - t0);
  }
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  void snap;
  times.sort((x, y) => x - y);
  return { median: times[Math.floor(times.length / 2)], p90: times[Math.floor(times.length * 0.9)] };
}

const rows = [];
for (const n of sizes) {
  const perPeer = await measure(n, rounds, false);
  const whole = await measure(n, Math.max(5, Math.round(rounds / 20)), true);
  rows.push({ n, perPeer, whole });
}
console.log(`one-peer delta applied and persisted (median of ${rounds}; p90 in brackets), ms`);
console.log('peers     per-peer rows       whole view (before)');
for (const r of rows)
  console.log(
    `${String(r.n).padEnd(9)} ${r.perPeer.median.toFixed(3).padStart(7)} [${r.perPeer.p90.toFixed(3)}]   ${r.whole.median.toFixed(2).padStart(9)} [${r.whole.p90.toFixed(2)}]`,
  );
const first = rows[0];
for (const r of rows.slice(1)) {
  const ratio = r.perPeer.median / first.perPeer.median;
  console.log(
    `ratio ${r.n}/${first.n}: ${ratio.toFixed(2)} (goal ≤ 1.5: ${ratio <= 1.5 ? 'met' : 'NOT met'}); before: ${(r.whole.median / first.whole.median).toFixed(1)}`,
  );
}

// 1,000 openings converged by @meshp/firewall-nftables vs a hand-written `nft -f` of the same
// 1,000 rules, in the same run, in namespaces made here; then a no-op ensure with 1,000 present
// against one read of the ruleset. The plugin speaks nft as it does by default: libnftables in a
// thread of its own (ADR 0048); the baselines are the nft tool, start-up included.
// Run: npx tsc -b plugins/firewall-nftables && node bench/nft-openings.bench.mjs   (root)
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { NftablesDriver, libnftRunner, localRunner, localSpawner, netnsPrefix } from '@meshp/firewall-nftables';

const N = 1000;
const ROUNDS = 9; // plus one warm-up round of each, untimed
const ns = `nq${randomBytes(2).toString('hex')}b`;
const dir = mkdtempSync(join(tmpdir(), `${ns}-`));
const BASE = `flush ruleset
table inet filter {
  chain input {
    type filter hook input priority filter; policy drop;
    ct state established,related accept
    ct state invalid drop
    iif "lo" accept
    tcp dport 8080 accept
    counter reject
  }
}
`;
const openings = Array.from({ length: N }, (_, i) => ({
  id: `bench/incoming/tcp/${20000 + i}`,
  module: 'bench',
  port: 20000 + i,
  protocol: 'tcp',
  from: ['10.70.1.0/24'],
  path: 'incoming',
  action: 'accept',
}));

const nft = (...args) => execFileSync('nsenter', [...netnsPrefix(ns).slice(1), 'nft', ...args], { encoding: 'utf8' });
const base = join(dir, 'base.nft');
writeFileSync(base, BASE);
const hand = join(dir, 'hand.nft');
const echoOut = join(dir, 'echo.out');
// The same accepts as the plugin writes them into this chain (which drops invalid packets: core's
// deniesInvalid), with `ct state != invalid`: for reference, what that one match costs a batch.
const handValid = join(dir, 'hand-valid.nft');
writeFileSync(
  handValid,
  openings.map((o) => `add rule inet filter input ip saddr 10.70.1.0/24 tcp dport ${o.port} ct state != invalid accept comment "meshp:${o.id}"`).join('\n') +
    '\n',
);
writeFileSync(
  hand,
  openings.map((o) => `add rule inet filter input ip saddr 10.70.1.0/24 tcp dport ${o.port} accept comment "meshp:${o.id}"`).join('\n') + '\n',
);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

execFileSync('ip', ['netns', 'add', ns]);
try {
  let calls = 0;
  let timings = [];
  const spawning = localRunner(netnsPrefix(ns));
  const inner = libnftRunner('nft', spawning, ns);
  const runner = async (argv, o) => {
    calls++;
    const t0 = performance.now();
    const r = await inner(argv, o);
    timings.push([argv.includes('-f') ? 'batch' : argv.includes('set') ? 'receipt' : 'list', performance.now() - t0]);
    return r;
  };
  const driver = new NftablesDriver({
    runner: spawning,
    nftRunner: runner,
    spawner: localSpawner(netnsPrefix(ns)),
    root: dir,
    configFile: '/etc/nftables.conf',
  });

  const handMs = [];
  const handValidMs = [];
  const echoMs = [];
  const pluginMs = [];
  const parts = [];
  for (let r = -1; r < ROUNDS; r++) {
    nft('-f', base);
    let t0 = performance.now();
    nft('-f', hand);
    if (r >= 0) handMs.push(performance.now() - t0);
    nft('-f', base);
    t0 = performance.now();
    nft('-f', handValid);
    if (r >= 0) handValidMs.push(performance.now() - t0);

    // The same hand-written file, echoed: what learning that the batch committed would cost by
    // reading back every rule (nft -e -a), for comparison with the receipt the plugin reads.
    nft('-f', base);
    t0 = performance.now();
    execFileSync('nsenter', [...netnsPrefix(ns).slice(1), 'sh', '-c', `nft -e -a -f ${hand} > ${echoOut}`]);
    if (r >= 0) echoMs.push(performance.now() - t0);

    nft('-f', base);
    timings = [];
    t0 = performance.now();
    const res = await driver.ensure(openings, []);
    if (r >= 0) pluginMs.push(performance.now() - t0);
    if (r >= 0) parts.push(timings);
    if (res.added.length !== N) throw new Error(`expected ${N} added, got ${res.added.length}`);
  }
  if (inner.engine() !== 'libnftables') throw new Error(`the plugin spoke ${inner.engine()}, not libnftables`);
  const h = median(handMs);
  const p = median(pluginMs);
  console.log(`hand-written nft -f, ${N} rules:  ${h.toFixed(1)} ms (median of ${ROUNDS})`);
  console.log(`plugin ensure, ${N} openings:      ${p.toFixed(1)} ms (median of ${ROUNDS}; list + plan + one batch file + its receipt read)`);
  const part = (kind, nth) => median(parts.map((p) => p.filter(([k]) => k === kind)[nth]?.[1] ?? 0)).toFixed(1);
  const lists = median(parts.map((p) => p.filter(([k]) => k === 'list').length));
  console.log(
    `  of which: list ${part('list', 0)} ms, batch ${part('batch', 0)} ms, receipt ${part('receipt', 0)} ms, ${lists - 1} re-list(s), the rest planning`,
  );
  console.log(`ratio plugin / hand-written:       ${(p / h).toFixed(2)}x (goal <= 1.3x)`);
  const hv = median(handValidMs);
  console.log(
    `for reference, the same hand-written file with the plugin's \`ct state != invalid\` on each accept: ${hv.toFixed(1)} ms = ${(hv / h).toFixed(2)}x (the plugin's batch is this file placed before the reject)`,
  );
  const e = median(echoMs);
  console.log(
    `for reference, the hand-written file echoed (nft -e -a -f, to a file; the check before the receipt): ${e.toFixed(1)} ms = ${(e / h).toFixed(2)}x`,
  );

  // The idle agent (issue 31): a no-op ensure with N present, against one read of the same ruleset
  // (`nft -j list ruleset`, the least a no-op can do), alternated, medians of ROUNDS.
  const noopMs = [];
  const listMs = [];
  const libListMs = [];
  let reads = 0;
  let commands = 0;
  for (let r = -1; r < ROUNDS; r++) {
    calls = 0;
    driver.nft.reads = 0;
    let t0 = performance.now();
    const noop = await driver.ensure(openings, []);
    if (r >= 0) noopMs.push(performance.now() - t0);
    if (noop.added.length || noop.removed.length) throw new Error('the no-op ensure changed something');
    reads = driver.nft.reads;
    commands = calls;
    t0 = performance.now();
    await spawning(['nft', '-j', 'list', 'ruleset']);
    if (r >= 0) listMs.push(performance.now() - t0);
    t0 = performance.now();
    await inner(['nft', '-j', 'list', 'ruleset']);
    if (r >= 0) libListMs.push(performance.now() - t0);
  }
  const n = median(noopMs);
  const l = median(listMs);
  console.log(`no-op ensure with ${N} present:    ${n.toFixed(1)} ms, ruleset read ${reads} time(s), ${commands} command(s) run (goal: once)`);
  console.log(`one nft -j list ruleset:           ${l.toFixed(1)} ms (the same read through libnftables in-process: ${median(libListMs).toFixed(1)} ms)`);
  console.log(`ratio no-op / one read:            ${(n / l).toFixed(2)}x (goal <= 1.2x; answered by the last no-op's memo ${driver.noop.hits} time(s))`);
} finally {
  execFileSync('ip', ['netns', 'del', ns]);
  rmSync(dir, { recursive: true, force: true });
}

// Issue 31: the controller's fan-out against the transport's own floor, in the same run.
// meshp: the fleet simulator (fleet/fleet.bench.mjs) with all N agents in one group (all-to-all):
// one join is one delta to each of the N agents, over real gRPC and TLS to a real `meshp controller
// serve`; its controller CPU net of idle, per agent-delta. The floor: a bare grpc-js server
// (fanout-floor/server.mjs) with the same certificate kind and server options, N agents' channels
// with the same channel options (one TLS connection each), writing a pre-encoded message of the join
// delta's size to the N streams and reading N acks; its CPU per agent-delta (over ROUNDS fan-outs).
// Both as agent-deltas/s per core, and the ratio (goal ≤ 1.5×); and each one's RSS per idle agent;
// and the join's ack time p50/p99 (goal at 5,000: all acked within 1.5 s).
// The agents enrol apart (a policy where they see nobody), then one policy change to all-to-all
// before their streams open (--enrol-apart: an all-to-all enrolment is a join to all, O(N²)), and
// keep a version, hash and count rather than a view (--light-agents: 25 million peers at 5,000);
// the controller's work per delta is the same.
// --profile: the controller runs under `--cpu-prof`; the samples in the join's window are put in
// buckets of main-thread CPU (fanout-floor/profile.mjs), printed, and saved beside the kept
// .cpuprofile as join-buckets.json.
// node bench/fanout-floor.bench.mjs [sizes, default 1000,5000] [--profile]; with no argument (make
// bench) the join at 1,000 is run once more under the profiler after the unprofiled sizes.
import { fork, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureCertificate } from '@meshp/controller';
import { bucketProfile } from './fanout-floor/profile.mjs';

const here = fileURLToPath(new URL('.', import.meta.url));
const args = process.argv.slice(2);
const PROFILE = args.includes('--profile');
const given = args.find((a) => !a.startsWith('--'));
const sizes = (given ?? '1000,5000').split(',').map(Number);
// `make bench` (no arguments): 1,000 and 5,000 unprofiled, then the join at 1,000 once more under the profiler (its cause).
const PROFILE_AFTER = !given && !PROFILE ? 1000 : null;
const ROUNDS = 5;
const ACK_BYTES = 48;
const fmt = (n, d = 1) => n.toLocaleString('en-US', { maximumFractionDigits: d });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const load = () =>
  loadavg()
    .map((x) => x.toFixed(2))
    .join(' ');
function usageOf(pid) {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return { cpuMs: (Number(f[11]) + Number(f[12])) * 10, rssKb: Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) };
}
function child(file) {
  const c = fork(join(here, 'fanout-floor', file), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  process.once('exit', () => c.kill('SIGKILL'));
  const waiting = new Map();
  let next = 0;
  const listeners = [];
  c.on('message', (m) => {
    if (m.id === undefined) return listeners.forEach((l) => l(m));
    waiting.get(m.id)(m);
    waiting.delete(m.id);
  });
  const call = (cmd, args = {}) =>
    new Promise((resolve) => {
      const id = next++;
      waiting.set(id, resolve);
      c.send({ id, cmd, ...args });
    });
  return { c, call, on: (l) => listeners.push(l) };
}

async function floor(n, bytes) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-fanout-floor-'));
  try {
    const tls = ensureCertificate(dir);
    const server = child('server.mjs');
    let opened = 0;
    server.on((m) => (opened = m.opened ?? opened));
    const { port } = await server.call('listen', { certPem: tls.certPem, keyPem: tls.keyPem });
    await sleep(500);
    const bare = usageOf(server.c.pid);
    const per = 2500;
    const clients = Array.from({ length: Math.ceil(n / per) }, () => child('client.mjs'));
    await Promise.all(
      clients.map((c, k) =>
        c.call('open', { port, certPem: tls.certPem, fingerprint: tls.fingerprint, count: Math.min(per, n - k * per), ackBytes: ACK_BYTES }),
      ),
    );
    while (opened < n) await sleep(100);
    await sleep(1500);
    const held = usageOf(server.c.pid);
    await server.call('fanout', { bytes, rounds: 1 }); // warm-up
    const a = usageOf(server.c.pid);
    const t = performance.now();
    await server.call('fanout', { bytes, rounds: ROUNDS });
    const wall = performance.now() - t;
    const b = usageOf(server.c.pid);
    for (const c of clients) c.c.send({ cmd: 'close' });
    server.c.send({ cmd: 'close' });
    return { usPerDelta: ((b.cpuMs - a.cpuMs) * 1000) / (n * ROUNDS), wallMs: wall / ROUNDS, rssKbPerAgent: (held.rssKb - bare.rssKb) / n };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function meshp(n, profile = PROFILE) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-fanout-meshp-'));
  try {
    const out = join(dir, 'rows.json');
    // The profile outlives this run's folder (it is printed where it is kept).
    const profDir = profile ? mkdtempSync(join(tmpdir(), 'meshp-fanout-profile-')) : null;
    const env = profDir ? { ...process.env, FLEET_CONTROLLER_NODE_ARGS: `--cpu-prof --cpu-prof-dir=${profDir}` } : process.env;
    // At most 100 agents waiting for their snapshot at once: an all-to-all snapshot at 5,000 is 1.2 MB.
    const window = n > 2000 ? ['--open-window', '100'] : [];
    const fleetArgs = [String(n), '--group', '0', '--join-seconds', '0', '--enrol-apart', '--light-agents', ...window, '--json', out];
    const p = spawn(process.execPath, [join(here, 'fleet', 'fleet.bench.mjs'), ...fleetArgs], {
      stdio: ['ignore', 'ignore', 'inherit'],
      env,
    });
    process.once('exit', () => p.kill('SIGKILL'));
    const code = await new Promise((r) => p.once('exit', r));
    if (code !== 0) throw new Error(`fleet bench exited ${code}`);
    const rows = JSON.parse(readFileSync(out, 'utf8'));
    if (profDir) {
      const file = readdirSync(profDir).find((f) => f.endsWith('.cpuprofile'));
      const j = rows.rows.find((r) => r.name === 'join');
      rows.profile = file
        ? { file: join(profDir, file), ...bucketProfile(join(profDir, file), j.monoStartUs, j.monoEndUs) }
        : { error: `no profile in ${profDir}` };
      // Kept beside the profile: the buckets, the top functions and the join's window (CLOCK_MONOTONIC µs).
      if (file) writeFileSync(join(profDir, 'join-buckets.json'), JSON.stringify({ n, window: [j.monoStartUs, j.monoEndUs], ...rows.profile }, null, 1));
    }
    return rows;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

console.log('fan-out of one join, all-to-all, real gRPC + TLS; controller CPU per agent-delta (meshp: net of idle; /proc ticks of 10 ms)');
console.log('N       msg B | meshp µs  deltas/s/core  RSS KB/agent | floor µs  deltas/s/core  RSS KB/conn | ratio (goal ≤ 1.5×) | load');
/** The join's profile, printed in buckets of main-thread CPU and the top functions. */
function printProfile(p, messages) {
  if (p.error) return console.log(`  profile: ${p.error}`);
  console.log(
    `  controller main thread in the join's window (V8 --cpu-prof, ${fmt(p.totalUs / 1000, 0)} ms busy, ${fmt(p.idleUs / 1000, 0)} ms idle; kept: ${p.file}):`,
  );
  for (const [name, us, share] of p.buckets)
    console.log(`    ${(share * 100).toFixed(1).padStart(5)}%  ${fmt(us / messages, 1).padStart(6)} µs/agent-delta  ${name}`);
  console.log('    top self time:');
  for (const [fn, us] of p.top.slice(0, 12)) console.log(`    ${((us / p.totalUs) * 100).toFixed(1).padStart(5)}%  ${fn}`);
}

for (const n of sizes) {
  const m = await meshp(n);
  const join = m.rows.find((r) => r.name === 'join');
  const bytes = Math.max(1, Math.round(join.bytes / Math.max(1, join.messages)));
  const f = await floor(n, bytes);
  const us = (join.netMs * 1000) / join.messages;
  const ratio = us / f.usPerDelta;
  console.log(
    [
      fmt(n).padEnd(7),
      String(bytes).padStart(5),
      '|',
      fmt(us, 0).padStart(8),
      fmt(1e6 / us, 0).padStart(14),
      fmt(m.rssKbPerAgent).padStart(13),
      '|',
      fmt(f.usPerDelta, 0).padStart(8),
      fmt(1e6 / f.usPerDelta, 0).padStart(14),
      fmt(f.rssKbPerAgent).padStart(12),
      '|',
      `${ratio.toFixed(2)}× ${ratio <= 1.5 ? 'met' : 'not met'}`.padStart(19),
      '|',
      load(),
    ].join(' '),
  );
  console.log(
    `  meshp join: ${join.messages} deltas, acked by all p50 ${fmt(join.p50, 0)} ms, p99 ${fmt(join.p99, 0)} ms, max ${fmt(join.max, 0)} ms (goal: all within 1,500 ms: ${join.max <= 1500 ? 'met' : 'not met'}); floor fan-out + acks ${fmt(f.wallMs, 0)} ms wall; RSS goal ≤ 60 KB/agent: ${m.rssKbPerAgent <= 60 ? 'met' : 'not met'}`,
  );
  console.log(
    `  meshp setup: enrolled apart at ${fmt(m.enrolPerS)}/s, all-to-all policy set in ${fmt(m.apart.ms, 0)} ms (${fmt(m.apart.cpuMs, 0)} ms controller CPU), ${fmt(n)} snapshots in ${fmt(m.snapS)} s`,
  );
  if (m.profile) printProfile(m.profile, join.messages);
}
if (PROFILE_AFTER) {
  const m = await meshp(PROFILE_AFTER, true);
  const join = m.rows.find((r) => r.name === 'join');
  console.log(
    `N = ${fmt(PROFILE_AFTER)} again, the controller under --cpu-prof: ${fmt((join.netMs * 1000) / join.messages, 0)} µs an agent-delta (the profiler's own cost in it), acked by all p99 ${fmt(join.p99, 0)} ms; load ${load()}`,
  );
  printProfile(m.profile, join.messages);
}
process.exit(0);

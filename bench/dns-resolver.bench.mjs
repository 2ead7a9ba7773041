// The mesh's names (issue 25). First: queries per second and p50/p99 latency of a mesh name asked of
// the node's resolver (the dns-resolver plugin, in a process of its own) against dnsmasq serving the
// same names from a hosts file, same load, same run, on loopback; the goal is the resolver's latency
// ≤ 1.5 × dnsmasq's. Then: a one-name delta applied (the view changed, the resolver's table updated)
// at 10,000 names against at 100; the goal is ≤ 2×.
//
// Run after `make build` (dnsmasq from Debian's dnsmasq-base): node bench/dns-resolver.bench.mjs
//   [names, default 1000] [queries, default 20000] [in flight, default 16] [deltas per size, default 300]
import { spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';
import dnsPacket from 'dns-packet';
import { Host } from '@meshp/core/host';
import { DeltaApplier } from '@meshp/core/delta';
import { DnsResolverPlugin } from '@meshp/dns-resolver';
import { address, peer } from './dns/view.mjs';

const names = Number(process.argv[2] ?? 1000);
const queries = Number(process.argv[3] ?? 20000);
const inFlight = Number(process.argv[4] ?? 16);
const rounds = Number(process.argv[5] ?? 300);
const here = dirname(fileURLToPath(import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'meshp-dns-bench-'));
const children = [];
process.on('exit', () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function freePort() {
  const s = createSocket('udp4');
  await new Promise((r) => s.bind(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

async function meshResolver() {
  const child = spawn(process.execPath, [join(here, 'dns/resolver.mjs'), String(names)], { stdio: ['pipe', 'pipe', 'inherit'] });
  children.push(child);
  const line = await new Promise((resolve) => createInterface({ input: child.stdout }).once('line', resolve));
  return JSON.parse(line).port;
}

async function dnsmasq() {
  const hosts = join(dir, 'hosts');
  writeFileSync(hosts, Array.from({ length: names }, (_, i) => `${address(i)} p${i}.bench.mesh\n`).join(''));
  const port = await freePort();
  const args = ['--keep-in-foreground', '--no-resolv', '--no-hosts', '--conf-file=/dev/null', '--user=root', '--bind-interfaces'];
  args.push('--listen-address=127.0.0.1', `--port=${port}`, `--addn-hosts=${hosts}`, `--pid-file=${join(dir, 'dnsmasq.pid')}`, '--log-facility=/dev/null');
  const child = spawn('dnsmasq', args, { stdio: 'ignore' });
  children.push(child);
  // Answering once a name resolves.
  for (let i = 0; i < 100; i++) {
    const r = await load(port, 1, 1).catch(() => null);
    if (r && r.lost === 0) return port;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error('dnsmasq did not answer');
}

/** `total` queries of random mesh names, `width` in flight, each timed from send to answer. */
function load(port, total, width, raw = false) {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    const pending = new Map();
    const times = [];
    let sent = 0;
    let lost = 0;
    let id = 0;
    const t0 = performance.now();
    const done = () => {
      if (times.length + lost < total) return;
      s.close();
      times.sort((a, b) => a - b);
      const wall = (performance.now() - t0) / 1000;
      if (raw) return resolve({ times, wall, lost });
      resolve({ qps: times.length / wall, p50: times[Math.floor(times.length * 0.5)], p99: times[Math.floor(times.length * 0.99)], lost });
    };
    const next = () => {
      if (sent >= total) return;
      sent++;
      id = (id + 1) & 0xffff;
      const q = dnsPacket.encode({
        type: 'query',
        id,
        flags: dnsPacket.RECURSION_DESIRED,
        questions: [{ type: 'A', name: `p${Math.floor(Math.random() * names)}.bench.mesh` }],
      });
      const timer = setTimeout(() => {
        pending.delete(q.readUInt16BE(0));
        lost++;
        next();
        done();
      }, 2000);
      pending.set(q.readUInt16BE(0), { at: performance.now(), timer });
      s.send(q, port, '127.0.0.1');
    };
    s.on('message', (m) => {
      const p = pending.get(m.readUInt16BE(0));
      if (!p) return;
      clearTimeout(p.timer);
      pending.delete(m.readUInt16BE(0));
      if (dnsPacket.decode(m).answers.length !== 1) return reject(new Error('a mesh name not answered'));
      times.push(performance.now() - p.at);
      next();
      done();
    });
    s.bind(0, '127.0.0.1', () => {
      for (let i = 0; i < width; i++) next();
    });
  });
}

/** One-name deltas applied to a resolver holding `n` names: the view changed, the resolver settled. */
async function deltas(n, k) {
  const plugin = new DnsResolverPlugin({ listenAddress: '127.0.0.1', port: 0, root: '/nonexistent' });
  const host = new Host({ stateDir: '/nonexistent', root: '/nonexistent' }).use(plugin);
  const a = new DeltaApplier();
  a.receive({ fromVersion: 0, toVersion: 1, network: 'bench', upsertPeers: Array.from({ length: n }, (_, i) => peer(i)), removePeers: [] });
  await plugin.attach(a.view);
  const times = [];
  for (let r = 0; r < k; r++) {
    const v = a.appliedVersion;
    const t0 = performance.now();
    // A new name each round (a join), or one renamed away (its name gone): what the table must follow.
    const change = a.receive({
      fromVersion: v,
      toVersion: v + 1,
      network: 'bench',
      upsertPeers: [peer(n + r, r)],
      removePeers: r % 2 ? [{ id: `p${n + r - 1}`, reason: 1 }] : [],
    }).change;
    host.hooks.viewChanged.call(change);
    await plugin.settled();
    times.push(performance.now() - t0);
    if (!plugin.holds(`p${n + r}.bench.mesh`) || (r % 2 && plugin.holds(`p${n + r - 1}.bench.mesh`))) throw new Error('the new name is not answered');
  }
  await plugin.close();
  times.sort((x, y) => x - y);
  return { median: times[Math.floor(times.length / 2)], p90: times[Math.floor(times.length * 0.9)] };
}

const meshPort = await meshResolver();
const maskPort = await dnsmasq();
await load(meshPort, 2000, inFlight);
await load(maskPort, 2000, inFlight);
// Interleaved in batches, the order alternating, so a machine busier at one moment than another weighs on both alike.
const BATCHES = 10;
const all = { mesh: [], mask: [] };
for (let i = 0; i < BATCHES; i++) {
  const order = i % 2 ? ['mask', 'mesh'] : ['mesh', 'mask'];
  for (const k of order) all[k].push(await load(k === 'mesh' ? meshPort : maskPort, Math.ceil(queries / BATCHES), inFlight, true));
}
const merged = (runs) => {
  const times = runs.flatMap((r) => r.times).sort((a, b) => a - b);
  const wall = runs.reduce((s, r) => s + r.wall, 0);
  return {
    qps: times.length / wall,
    p50: times[Math.floor(times.length * 0.5)],
    p99: times[Math.floor(times.length * 0.99)],
    lost: runs.reduce((s, r) => s + r.lost, 0),
  };
};
const mesh = merged(all.mesh);
const mask = merged(all.mask);
console.log(`${queries} A queries of ${names} mesh names, ${inFlight} in flight, on loopback, in ${BATCHES} interleaved batches (ms)`);
console.log('server                 q/s       p50     p99    lost');
for (const [label, r] of [
  ['mesh resolver', mesh],
  ['dnsmasq (hosts file)', mask],
])
  console.log(`${label.padEnd(20)} ${r.qps.toFixed(0).padStart(7)}  ${r.p50.toFixed(3).padStart(6)}  ${r.p99.toFixed(3).padStart(6)}  ${r.lost}`);
const r50 = mesh.p50 / mask.p50;
const r99 = mesh.p99 / mask.p99;
console.log(
  `latency ratio mesh/dnsmasq: p50 ${r50.toFixed(2)}, p99 ${r99.toFixed(2)} (goal ≤ 1.5: ${r50 <= 1.5 && r99 <= 1.5 ? 'met' : 'NOT met'}); q/s ratio ${(mesh.qps / mask.qps).toFixed(2)}`,
);

const small = await deltas(100, rounds);
const large = await deltas(10000, rounds);
console.log(`one-name delta applied, view to answered table (median of ${rounds}; p90 in brackets), ms`);
console.log(`100 names      ${small.median.toFixed(3)} [${small.p90.toFixed(3)}]`);
console.log(`10000 names    ${large.median.toFixed(3)} [${large.p90.toFixed(3)}]`);
const ratio = large.median / small.median;
console.log(`ratio 10000/100: ${ratio.toFixed(2)} (goal ≤ 2: ${ratio <= 2 ? 'met' : 'NOT met'})`);
for (const c of children) c.stdin?.end();
process.exit(0);

// Route groups (issue 26): the failover of a subnet router and the cost of going through one.
// A user a and routers r1, r2 in network namespaces made here, on an underlay bridge, each running the
// tunnel plugin on wireguard-go (bench/route-failover/worker.mjs) fed by an in-process controller's
// deltas (the controller's own Controller: scope, primaries, failover); a LAN namespace behind r1 and
// r2 (192.168.78.0/24, a host serving TCP), the routers forwarding and masquerading by hand.
//  - failover: 10 times, the primary's worker (its agent) and its wireguard-go are killed, the
//    controller told its stream ended (what the hub does when a Sync stream ends), a's delta applied;
//    the time from the kill until a TCP connection from a to the LAN host is made again, p50/p99. The
//    killed router comes back (a snapshot) and stays secondary: the next failover goes the other way.
//    Not in it: the time a real controller takes to see the stream end (a killed agent's socket closes
//    at once; the lab, test/lab/tunnel-wireguard/routes.test.ts, prints the whole of it).
//  - throughput: iperf3 (TCP, 3 s) from a to the LAN host through the primary, and from a to the
//    primary's own mesh address over the tunnel (the baseline), same run; the ratio printed.
// Run: npx tsc -b && node bench/route-failover.bench.mjs   (root; iperf3 and wireguard-go installed)
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Controller, MemoryStore } from '@meshp/controller';

const FAILOVERS = Number(process.env.BENCH_FAILOVERS ?? 10);
const LAN_HOST = '192.168.78.2';
const LAN_PORT = 8080;
const say = (m) => process.env.BENCH_VERBOSE && console.error(`${new Date().toISOString()} ${m}`);
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)];
const sh = (cmd, args, input) => execFileSync(cmd, args, { input, stdio: ['pipe', 'pipe', 'pipe'] }).toString();
const inNs = (ns, cmd, args, input) => sh('ip', ['netns', 'exec', ns, cmd, ...args], input);
const alive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

const prefix = `rfb${randomBytes(2).toString('hex')}`;
const dir = mkdtempSync(join(tmpdir(), 'meshp-route-failover-'));
const namespaces = [];
const procs = new Set();
const wgPids = new Set();

function cleanup() {
  for (const p of procs) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  for (const pid of wgPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  for (const ns of namespaces) {
    try {
      sh('ip', ['netns', 'del', ns]);
    } catch {
      // already gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
  // A wireguard-go killed leaves its UAPI socket behind.
  for (const name of ['a', 'r1', 'r2']) rmSync(`/var/run/wireguard/${prefix}${name}.sock`, { force: true });
}
process.once('exit', cleanup);
for (const sig of ['SIGTERM', 'SIGINT']) process.once(sig, () => process.exit(1));

function netns(name) {
  const ns = `${prefix}${name}`;
  sh('ip', ['netns', 'add', ns]);
  namespaces.push(ns);
  inNs(ns, 'ip', ['link', 'set', 'lo', 'up']);
  return ns;
}

function wire(a, aIf, b, bIf) {
  sh('ip', ['link', 'add', aIf, 'type', 'veth', 'peer', 'name', bIf]);
  sh('ip', ['link', 'set', aIf, 'netns', a]);
  sh('ip', ['link', 'set', bIf, 'netns', b]);
}

function background(ns, cmd, args) {
  const p = spawn('ip', ['netns', 'exec', ns, cmd, ...args], { stdio: 'ignore' });
  procs.add(p);
  return p;
}

/** A node's worker: the tunnel plugin in its namespace, spoken to over IPC. */
function worker(name, ns) {
  const p = spawn(
    'ip',
    ['netns', 'exec', ns, process.execPath, fileURLToPath(new URL('./route-failover/worker.mjs', import.meta.url)), `${prefix}${name}`, join(dir, name)],
    {
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      serialization: 'advanced',
    },
  );
  procs.add(p);
  let next = 0;
  const waiting = new Map();
  const ready = new Promise((resolve) => p.once('message', resolve));
  p.on('message', (m) => {
    const w = waiting.get(m.id);
    if (!w) return;
    waiting.delete(m.id);
    if (m.error) w.reject(new Error(`${name}: ${m.error}`));
    else w.resolve(m);
  });
  const ask = (m) =>
    new Promise((resolve, reject) => {
      const id = ++next;
      waiting.set(id, { resolve, reject });
      p.send({ ...m, id });
    });
  return { name, ns, p, ready, ask };
}

async function main() {
  // The underlay, the nodes, the LAN.
  const under = netns('u');
  inNs(under, 'ip', ['link', 'add', 'br0', 'type', 'bridge']);
  inNs(under, 'ip', ['link', 'set', 'br0', 'up']);
  const nodes = { a: { ip: '10.98.0.1', tag: 'user' }, r1: { ip: '10.98.0.2', tag: 'router' }, r2: { ip: '10.98.0.3', tag: 'router' } };
  for (const [name, n] of Object.entries(nodes)) {
    n.ns = netns(name);
    wire(n.ns, 'u0', under, `${prefix}${name}`);
    inNs(n.ns, 'ip', ['addr', 'add', `${n.ip}/24`, 'dev', 'u0']);
    inNs(n.ns, 'ip', ['link', 'set', 'u0', 'up']);
    inNs(under, 'ip', ['link', 'set', `${prefix}${name}`, 'master', 'br0', 'up']);
  }
  const lan = netns('lan');
  inNs(lan, 'ip', ['link', 'add', 'br0', 'type', 'bridge']);
  inNs(lan, 'ip', ['addr', 'add', `${LAN_HOST}/24`, 'dev', 'br0']);
  inNs(lan, 'ip', ['link', 'set', 'br0', 'up']);
  for (const [name, addr] of [
    ['r1', '192.168.78.1'],
    ['r2', '192.168.78.3'],
  ]) {
    const ns = nodes[name].ns;
    wire(ns, 'l0', lan, `${prefix}l${name}`);
    inNs(ns, 'ip', ['addr', 'add', `${addr}/24`, 'dev', 'l0']);
    inNs(ns, 'ip', ['link', 'set', 'l0', 'up']);
    inNs(lan, 'ip', ['link', 'set', `${prefix}l${name}`, 'master', 'br0', 'up']);
    // The operator's part today (README: what it does not do yet): forwarding on, masquerade towards the LAN.
    inNs(ns, 'sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
    inNs(ns, 'nft', ['-f', '-'], 'table ip benchnat {\n chain post { type nat hook postrouting priority 100; oifname "l0" masquerade; }\n}\n');
  }
  background(lan, process.execPath, [
    '-e',
    `require('net').createServer((s) => { s.on('error', () => {}); s.end('lan\\n'); }).listen(${LAN_PORT}, '${LAN_HOST}')`,
  ]);
  background(lan, 'iperf3', ['-s', '-B', LAN_HOST]);

  // The controller and the workers.
  const c = new Controller(new MemoryStore());
  c.createNetwork('n', { privateRange: '100.99.0.0/16', privateNetwork: 'tunnel' });
  const workers = {};
  for (const [name, n] of Object.entries(nodes)) {
    workers[name] = worker(name, n.ns);
    await workers[name].ready;
    const { key } = await workers[name].ask({ key: true });
    c.join('n', { id: name, nodeKey: `k${name}`, tags: [n.tag], endpoints: [`${n.ip}:51820`], tunnelKey: key });
  }
  c.setPolicy('n', [
    { from: 'user', to: 'route:lan' },
    { from: 'user', to: 'router', ports: ['5201/tcp'] },
  ]);
  c.setRouteGroup('n', { name: 'lan', prefixes: ['192.168.78.0/24'], viaPeers: ['r1', 'r2'] });
  const up = new Set(Object.keys(nodes));
  const deliver = async (name) => {
    for (;;) {
      const d = c.deltaFor('n', name);
      if (!d) return;
      const r = await workers[name].ask({ delta: d });
      if (r.pid) wgPids.add(r.pid);
      workers[name].wg = r.pid;
      c.ack('n', name, r.ack.appliedVersion, r.ack.stateHash);
    }
  };
  for (const name of Object.keys(nodes)) await deliver(name);
  const meshOf = (name) => c.member('n', name).addresses[0].split('/')[0];
  await workers.a.ask({ probe: { host: LAN_HOST, port: LAN_PORT } });
  say('a reaches the LAN');

  // Failovers.
  const times = [];
  for (let i = 0; i < FAILOVERS; i++) {
    const primary = c.routeGroups('n')[0].primary;
    const other = primary === 'r1' ? 'r2' : 'r1';
    const w = workers[primary];
    const t0 = performance.timeOrigin + performance.now();
    w.p.kill('SIGKILL');
    if (w.wg && alive(w.wg)) process.kill(w.wg, 'SIGKILL');
    const flowing = workers.a.ask({ probe: { host: LAN_HOST, port: LAN_PORT } });
    up.delete(primary);
    c.routeLiveness('n', primary, false, (id) => up.has(id));
    await Promise.all([deliver('a'), deliver(other)]);
    const { at } = await flowing;
    times.push(at - t0);
    say(`failover ${i + 1}: ${primary} → ${other} ${(at - t0).toFixed(0)} ms`);
    // Back: a fresh worker (the same state folder: its key), a snapshot, its stream open again; it stays secondary.
    await new Promise((r) => (w.p.exitCode !== null || w.p.signalCode !== null ? r() : w.p.once('exit', r)));
    for (let k = 0; k < 50 && alive(w.wg); k++) await new Promise((r) => setTimeout(r, 20));
    say(`${primary} stopped`);
    workers[primary] = worker(primary, nodes[primary].ns);
    await workers[primary].ready;
    say(`${primary} worker ready`);
    c.hello('n', primary, 0, '');
    await deliver(primary);
    say(`${primary} back`);
    up.add(primary);
    c.routeLiveness('n', primary, true, (id) => up.has(id));
    await Promise.all(Object.keys(nodes).map(deliver));
    if (c.routeGroups('n')[0].primary !== other) throw new Error('a router coming back took the group back (flap)');
  }

  // Throughput through the primary to the LAN host, and directly to the primary's mesh address over the tunnel.
  const primary = c.routeGroups('n')[0].primary;
  background(nodes[primary].ns, 'iperf3', ['-s', '-B', meshOf(primary)]);
  await new Promise((r) => setTimeout(r, 500));
  const iperf = (target) => {
    const out = JSON.parse(inNs(nodes.a.ns, 'iperf3', ['-c', target, '-t', '3', '-J']));
    return out.end.sum_received.bits_per_second / 1e6;
  };
  await workers.a.ask({ probe: { host: meshOf(primary), port: 5201 } });
  const direct = iperf(meshOf(primary));
  const routed = iperf(LAN_HOST);

  const p50 = pct(times, 50);
  const p99 = pct(times, 99);
  console.log(`route failover (${FAILOVERS} failovers of a subnet router, its agent and wireguard-go killed, until a's TCP to the LAN flows again):`);
  console.log(
    `  p50 ${p50.toFixed(0)} ms, p99 ${p99.toFixed(0)} ms (goal: 5000 ms; ratio p99/goal ${(p99 / 5000).toFixed(2)}); all: ${times.map((x) => x.toFixed(0)).join(', ')} ms`,
  );
  console.log(
    `TCP throughput (iperf3, 3 s): through the router ${routed.toFixed(0)} Mbit/s, direct over the tunnel ${direct.toFixed(0)} Mbit/s: ratio ${(routed / direct).toFixed(2)}`,
  );
}

try {
  await main();
} finally {
  cleanup();
}
process.exit(0);

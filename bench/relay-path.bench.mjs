// The relayed path against the direct one (issue 27, ADR 0040), same run, real NAT and real coturn in
// namespaces made here: s1 and s3 each behind an endpoint-independent NAT (`masquerade`), s2 behind a
// symmetric one (`masquerade fully-random`); coturn (use-auth-secret) on the public side. Each node
// is the tunnel plugin in its namespace (test/lab/tunnel-wireguard/node.mjs) fed its view as the
// controller computes it (relaysFor: its own credential; endpointsOf: the mapping, then `relay:`).
//  1. From the delta that gives s1 its peer to the first TCP answer over the tunnel: s1 → s3
//     (direct: the peer's NAT mapping) and s1 → s2 (relayed: its direct candidate first, 15 s, then
//     the relay), ratio printed.
//  2. TCP throughput with iperf3 (5 s each), s1 → s3 direct and s1 → s2 relayed, ratio printed.
// Run: npx tsc -b && node bench/relay-path.bench.mjs   (root; coturn, iperf3, wireguard-go installed)
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { endpointsOf, relaysFor } from '@meshp/core/delta';

const NODE = fileURLToPath(new URL('../test/lab/tunnel-wireguard/node.mjs', import.meta.url));
const P = `rlb${randomBytes(2).toString('hex')}`;
const PUB = '10.95.0';
const P0 = `${PUB}.10`;
const SECRET = randomBytes(16).toString('hex');
const root = mkdtempSync(join(tmpdir(), 'meshp-rlb-'));
const procs = [];
const namespaces = [];
const ip = (...a) => execFileSync('ip', a);
const inNs = (ns, cmd, args, input) => execFileSync('ip', ['netns', 'exec', ns, cmd, ...args], { input, encoding: 'utf8' });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function nsAdd(name) {
  ip('netns', 'add', name);
  namespaces.push(name);
  ip('-n', name, 'link', 'set', 'lo', 'up');
}
function veth(a, aNs, aAddr, b, bNs, bAddr) {
  ip('link', 'add', a, 'type', 'veth', 'peer', 'name', b);
  ip('link', 'set', a, 'netns', aNs);
  ip('link', 'set', b, 'netns', bNs);
  if (aAddr) ip('-n', aNs, 'addr', 'add', aAddr, 'dev', a);
  if (bAddr) ip('-n', bNs, 'addr', 'add', bAddr, 'dev', b);
  ip('-n', aNs, 'link', 'set', a, 'up');
  ip('-n', bNs, 'link', 'set', b, 'up');
}
const natRules = (pub, symmetric) => `table ip rlb_nat {
  chain post { type nat hook postrouting priority srcnat; oifname "${pub}" masquerade${symmetric ? ' fully-random' : ''}; }
}
table inet rlb_fw {
  chain input { type filter hook input priority filter; policy accept; iifname "${pub}" ct state new drop; }
  chain forward { type filter hook forward priority filter; policy accept; iifname "${pub}" ct state new drop; }
}
`;

/** A child in a namespace whose stdout is JSON lines; `request` writes one and waits for its answer. */
function child(ns, args) {
  const c = spawn('ip', ['netns', 'exec', ns, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
  procs.push(c);
  const lines = [];
  let seq = 0;
  createInterface({ input: c.stdout }).on('line', (l) => {
    try {
      lines.push(JSON.parse(l));
    } catch {
      lines.push({ msg: l });
    }
  });
  const wait = async (pred, ms = 60_000) => {
    const end = Date.now() + ms;
    for (;;) {
      const hit = lines.find(pred);
      if (hit) return hit;
      if (Date.now() > end || c.exitCode !== null) throw new Error(`no answer from ${ns}: ${JSON.stringify(lines.slice(-3))}`);
      await sleep(50);
    }
  };
  return {
    c,
    lines,
    wait,
    async request(op, ms) {
      const id = ++seq;
      c.stdin.write(JSON.stringify({ ...op, id }) + '\n');
      return wait((l) => l.id === id && l.msg !== 'tunnel change refused', ms);
    },
  };
}

async function main() {
  nsAdd(`${P}u`);
  ip('-n', `${P}u`, 'link', 'add', 'br0', 'type', 'bridge');
  ip('-n', `${P}u`, 'link', 'set', 'br0', 'up');
  const pub = (name, addr, i) => {
    nsAdd(`${P}${name}`);
    veth(`${P}v${i}a`, `${P}${name}`, `${addr}/24`, `${P}v${i}b`, `${P}u`, '');
    ip('-n', `${P}u`, 'link', 'set', `${P}v${i}b`, 'master', 'br0');
  };
  pub('p0', P0, 0);
  const sites = [
    { name: 's1', symmetric: false },
    { name: 's2', symmetric: true },
    { name: 's3', symmetric: false },
  ].map((s, k) => {
    const i = k + 1;
    pub(`r${i}`, `${PUB}.${i}`, i);
    nsAdd(`${P}${s.name}`);
    veth(`${P}l${i}a`, `${P}${s.name}`, `192.168.${i}.2/24`, `${P}l${i}b`, `${P}r${i}`, `192.168.${i}.1/24`);
    ip('-n', `${P}${s.name}`, 'route', 'add', 'default', 'via', `192.168.${i}.1`);
    inNs(`${P}r${i}`, 'sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    inNs(`${P}r${i}`, 'nft', ['-f', '-'], natRules(`${P}v${i}a`, s.symmetric));
    return { ...s, i, ns: `${P}${s.name}`, router: `${PUB}.${i}`, mesh: `10.99.0.${i}`, ifname: `${P}w${i}`, state: join(root, s.name) };
  });
  const turn = spawn(
    'ip',
    [
      'netns',
      'exec',
      `${P}p0`,
      'turnserver',
      '-n',
      '--listening-ip',
      P0,
      '--listening-port',
      '3478',
      '--relay-ip',
      P0,
      '--use-auth-secret',
      `--static-auth-secret=${SECRET}`,
      '--realm',
      'meshp.bench',
      '--no-tls',
      '--no-dtls',
      '--no-cli',
      '--min-port',
      '49160',
      '--max-port',
      '49200',
      '--log-file',
      'stdout',
      '--simple-log',
      '--pidfile',
      '',
    ],
    { stdio: 'ignore' },
  );
  procs.push(turn);
  for (let k = 0; k < 100 && !inNs(`${P}p0`, 'ss', ['-uln']).includes(`${P0}:3478`); k++) await sleep(100);

  const stored = {
    relays: [{ id: 'bench', address: P0, port: 3478, transport: 'udp', region: '', secretName: 'turn' }],
    secrets: { turn: SECRET },
    mintedAt: Math.floor(Date.now() / 1000),
  };
  for (const s of sites) {
    s.proc = child(s.ns, [
      process.execPath,
      NODE,
      JSON.stringify({ name: s.name, ifname: s.ifname, stateDir: s.state, graceMs: 60_000, serve: [7000], privateRange: '10.99.0.0/24' }),
    ]);
    s.key = (await s.proc.wait((l) => l.msg === 'ready')).publicKey;
    s.version = 0;
  }
  const tunnel = (s) => ({ address: s.mesh, listenPort: 51820, mtu: 1380, keepaliveSeconds: 25 });
  const filter = { rules: [{ sourceTags: ['site'], destinationTags: ['site'], ports: [] }] };
  const send = (s, upsertPeers) =>
    s.proc.request({
      op: 'delta',
      delta: {
        network: 'bench',
        fromVersion: s.version,
        toVersion: ++s.version,
        upsertPeers,
        removePeers: [],
        tunnel: tunnel(s),
        filter,
        relays: relaysFor({ id: s.name, tunnelKey: s.key }, stored),
      },
    });
  for (const s of sites) await send(s, []);
  // Each node's allocation, as its report says (what the controller would send its peers).
  for (const s of sites)
    for (;;) {
      const r = await s.proc.request({ op: 'report' });
      if (r.relay?.relayedAddress) {
        s.relayed = r.relay.relayedAddress;
        break;
      }
      await sleep(200);
    }
  // The peer as the controller would give it: the NAT mapping (an endpoint-independent one keeps the port), then the relay.
  const image = (s) => ({
    id: s.name,
    nodeKey: `ed-${s.name}`,
    addresses: [s.mesh],
    tags: ['site'],
    endpoints: endpointsOf({ endpoints: [], mappedEndpoint: `${s.router}:51820`, relayedEndpoint: s.relayed }),
    inboundOnly: false,
    tunnelKey: s.key,
  });
  const [s1, s2, s3] = sites;

  const firstPacket = async (to) => {
    const t0 = performance.now();
    await send(s1, [image(to)]);
    await send(to, [image(s1)]);
    for (;;) {
      const r = await s1.proc.request({ op: 'connect', host: to.mesh, port: 7000, timeoutMs: 1000 });
      if (r.ok) return performance.now() - t0;
      if (performance.now() - t0 > 120_000) throw new Error(`no packet s1 → ${to.name} in 120 s`);
    }
  };
  const direct = await firstPacket(s3);
  const relayed = await firstPacket(s2);
  const wgEndpoint = (to) =>
    inNs(s1.ns, 'wg', ['show', s1.ifname, 'endpoints'])
      .split('\n')
      .find((l) => l.startsWith(to.key))
      ?.split('\t')[1];
  console.log(
    `enrolment to first packet: direct ${(direct / 1000).toFixed(1)} s (s1 → s3 at ${wgEndpoint(s3)}), relayed ${(relayed / 1000).toFixed(1)} s (s1 → s2 at ${wgEndpoint(s2)}): ratio ${(relayed / direct).toFixed(2)}×`,
  );

  const iperf = (to) => {
    const server = spawn('ip', ['netns', 'exec', to.ns, 'iperf3', '-s', '-1', '-B', to.mesh], { stdio: 'ignore' });
    procs.push(server);
    execFileSync('sleep', ['1']);
    const out = JSON.parse(inNs(s1.ns, 'iperf3', ['-c', to.mesh, '-t', '5', '-J']));
    return out.end.sum_received.bits_per_second / 1e6;
  };
  const dMbps = iperf(s3);
  const rMbps = iperf(s2);
  console.log(
    `TCP throughput (iperf3, 5 s): direct ${dMbps.toFixed(1)} Mbit/s, relayed through coturn ${rMbps.toFixed(1)} Mbit/s: ratio ${(rMbps / dMbps).toFixed(3)}×`,
  );
}

try {
  await main();
} finally {
  for (const c of procs) if (c.exitCode === null && c.pid) c.kill('SIGKILL');
  await sleep(200);
  for (let i = 1; i <= 3; i++) {
    try {
      const pid = Number(readFileSync(join(root, `s${i}`, `${P}w${i}.pid`), 'utf8'));
      if (pid) process.kill(pid, 'SIGKILL');
    } catch {
      // not started
    }
    rmSync(`/var/run/wireguard/${P}w${i}.sock`, { force: true });
  }
  for (const n of namespaces.reverse()) execFileSync('ip', ['netns', 'del', n], { stdio: 'ignore' });
  rmSync(root, { recursive: true, force: true });
}

// The tunnel plugin on wireguard-go in a namespace made here: a one-peer delta applied to an
// interface holding 100 and 10,000 peers (median of rounds, each an upsert or a removal: one UAPI
// set and one nft transaction), the ratio t(10k)/t(100) printed (goal ≤ 2); and the time to
// configure a 10,000-peer snapshot on a fresh interface.
// Run: npx tsc -b plugins/tunnel-wireguard && node bench/tunnel-wireguard.bench.mjs   (root)
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Host } from '@meshp/core/host';
import { DeltaApplier, REMOVAL_REASON } from '@meshp/core/delta';
import {
  TunnelWireguardPlugin,
  WireguardGo,
  generatePrivateKey,
  keyToHex,
  peerConfig,
  uapiGet,
  uapiSet,
  upsertLines,
  removeLines,
  socketPath,
} from '@meshp/tunnel-wireguard';

const ROUNDS = 15; // plus warm-up rounds, untimed
const SIZES = (process.env.BENCH_SIZES ?? '100,10000').split(',').map(Number);
const say = (m) => process.env.BENCH_VERBOSE && console.error(`${new Date().toISOString()} ${m}`);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

if (process.argv[2] !== '--inner') {
  const ns = `tb${randomBytes(2).toString('hex')}`;
  execFileSync('ip', ['netns', 'add', ns]);
  try {
    execFileSync('nsenter', [`--net=/var/run/netns/${ns}`, '--', process.execPath, fileURLToPath(import.meta.url), '--inner', ns], { stdio: 'inherit' });
  } finally {
    execFileSync('ip', ['netns', 'del', ns]);
  }
  process.exit(0);
}

const prefix = process.argv[3];
// Any 32 bytes are a public key to WireGuard; real key pairs would only slow the set-up down.
const keys = (n) => Array.from({ length: n }, () => randomBytes(32).toString('base64'));
const peer = (i, key) => ({
  id: `p${i}`,
  nodeKey: 'ed',
  addresses: [`10.100.${i >> 8}.${i & 255}`],
  tags: ['app'],
  endpoints: [`192.0.2.${i & 255}:51820`],
  inboundOnly: false,
  tunnelKey: key,
});
const tunnel = { address: '10.100.255.254', listenPort: 51820, mtu: 1420, keepaliveSeconds: 0 };
const filter = { rules: [{ sourceTags: ['app'], destinationTags: ['db'], ports: ['5432/tcp'] }] };

async function withInterface(n, name, fn) {
  const dir = mkdtempSync(join(tmpdir(), `meshp-twg-bench-${name}-`));
  const plugin = new TunnelWireguardPlugin({ interface: `${prefix}${name}`, stateDir: dir, privateRange: '10.100.0.0/16', implementation: 'wireguard-go' });
  const host = new Host({ stateDir: dir }).use(plugin);
  const applier = new DeltaApplier({ limits: { maxPeers: 100_000, maxEntries: 100_000 } });
  await plugin.attach(applier.view);
  const deliver = async (delta) => {
    const r = applier.receive(delta);
    const t0 = performance.now();
    host.hooks.viewChanged.call(r.change);
    await plugin.settled();
    const ms = performance.now() - t0;
    if (plugin.status().lastError) throw new Error(plugin.status().lastError);
    return ms;
  };
  try {
    return await fn({ plugin, applier, deliver, socket: socketPath(`${prefix}${name}`) });
  } finally {
    await plugin.close({ down: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

const results = {};
for (const n of SIZES) {
  say(`${n}: keys`);
  const base = keys(n);
  say(`${n}: keys made`);
  const spare = keys(ROUNDS + 3);
  results[n] = await withInterface(n, `s${n}`, async ({ applier, deliver, socket }) => {
    const snapMs = await deliver({
      network: 'bench',
      fromVersion: 0,
      toVersion: 1,
      upsertPeers: base.map((k, i) => peer(i, k)),
      removePeers: [],
      tunnel,
      filter,
    });
    say(`${n}: snapshot applied in ${snapMs} ms`);
    const held = (await uapiGet(socket)).peers.length;
    if (held !== n) throw new Error(`the interface holds ${held} peers, not ${n}`);
    const times = [];
    for (let r = 0; r < ROUNDS + 3; r++) {
      const v = applier.view.version;
      const id = n + r;
      const up = await deliver({ network: 'bench', fromVersion: v, toVersion: v + 1, upsertPeers: [peer(id, spare[r])], removePeers: [] });
      const down = await deliver({
        network: 'bench',
        fromVersion: v + 1,
        toVersion: v + 2,
        upsertPeers: [],
        removePeers: [{ id: `p${id}`, reason: REMOVAL_REASON.REMOVED }],
      });
      if (r >= 3) times.push(up, down);
    }
    // The device alone: one peer in and out by UAPI, without the plugin or nft.
    const uapi = [];
    for (let r = 0; r < ROUNDS + 3; r++) {
      const key = randomBytes(32).toString('base64');
      const t0 = performance.now();
      await uapiSet(socket, upsertLines({ publicKey: key, allowedIps: ['10.101.0.1/32'], endpoint: '192.0.2.1:51820', keepalive: 0 }));
      const t1 = performance.now();
      await uapiSet(socket, removeLines(key));
      if (r >= 3) uapi.push(t1 - t0, performance.now() - t1);
    }
    // nft alone: one element in and out of a rule's set of this interface's table.
    const table = `meshp_wg_${prefix}s${n}`;
    const nftMs = [];
    for (let r = 0; r < 7; r++) {
      for (const op of ['add', 'delete']) {
        const t0 = performance.now();
        execFileSync('nft', ['-f', '-'], { input: `${op} element inet ${table} r04 { 10.101.0.1 }\n` });
        nftMs.push(performance.now() - t0);
      }
    }
    return { snapMs, deltaMs: median(times), uapiMs: median(uapi), nftMs: median(nftMs) };
  });
  // The baseline of the snapshot: the same peers by hand, one UAPI `set` (private key, port, every
  // peer) on a fresh wireguard-go, its text written before the clock starts.
  const dir = mkdtempSync(join(tmpdir(), `meshp-twg-bench-h${n}-`));
  const wg = new WireguardGo({ ifname: `${prefix}h${n}`, stateDir: dir });
  try {
    await wg.ensure();
    const lines = [`private_key=${keyToHex(generatePrivateKey())}`, `listen_port=${tunnel.listenPort + 1}`];
    base.forEach((k, i) => lines.push(...upsertLines(peerConfig(peer(i, k), 0))));
    const t0 = performance.now();
    await uapiSet(wg.socket, lines);
    results[n].handSnapMs = performance.now() - t0;
  } finally {
    await wg.stop();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(
    `${n} peers: snapshot configured in ${results[n].snapMs.toFixed(0)} ms (one hand-written UAPI set of the same peers ${results[n].handSnapMs.toFixed(0)} ms, ratio ${(results[n].snapMs / results[n].handSnapMs).toFixed(2)}, goal ≤ 1.3); one-peer delta median ${results[n].deltaMs.toFixed(2)} ms (the UAPI call alone ${results[n].uapiMs.toFixed(2)} ms, one nft element change alone ${results[n].nftMs.toFixed(1)} ms)`,
  );
}
const [small, large = small] = SIZES;
console.log(`ratio t(${large})/t(${small}) for a one-peer delta: ${(results[large].deltaMs / results[small].deltaMs).toFixed(2)} (goal ≤ 2)`);
console.log(`ratio for the UAPI call alone: ${(results[large].uapiMs / results[small].uapiMs).toFixed(2)}`);
for (const n of SIZES) {
  const r = results[n];
  console.log(
    `${n} peers: one-peer delta ${r.deltaMs.toFixed(2)} ms against the UAPI call plus one nft transaction ${(r.uapiMs + r.nftMs).toFixed(2)} ms: ratio ${(r.deltaMs / (r.uapiMs + r.nftMs)).toFixed(2)} (goal ≤ 2)`,
  );
}
console.log(
  `load average while measured: ${(await import('node:os'))
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ')}`,
);
console.log(
  `time to configure a ${large}-peer snapshot: ${results[large].snapMs.toFixed(0)} ms, one hand-written UAPI set ${results[large].handSnapMs.toFixed(0)} ms: ratio ${(results[large].snapMs / results[large].handSnapMs).toFixed(2)} (goal ≤ 1.3)`,
);

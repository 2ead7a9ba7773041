// One join in an all-to-all network: the fan-out of deltas vs a full-state push, in the same run.
// And an agent applying a one-peer delta to a large view vs a small one.
// Run after `npx tsc -b`: node bench/delta-fanout.bench.mjs [sizes, default 500,5000,50000]
import {
  DeltaApplier,
  PolicyIndex,
  SCOPE,
  addPeer,
  componentDigest,
  componentsFor,
  emptyDigest,
  peerDigest,
  peerImage,
  removePeer,
  stateHash,
  storeDigest,
} from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { StateDelta } from '@meshp/protocol';

const sizes = (process.argv[2] ?? '500,5000,50000').split(',').map(Number);
const N = 'bench';
const cpu = (f) => {
  const a = process.cpuUsage();
  const r = f();
  const b = process.cpuUsage(a);
  return { r, us: b.user + b.system };
};
const fmt = (n) => n.toLocaleString('en-US', { maximumFractionDigits: 1 });

/** A controller whose every node has acked the current version (as after a restart from persisted state). */
function network(size) {
  const store = new MemoryStore();
  const c = new Controller(store, { logDepth: 100 });
  c.createNetwork(N);
  c.setPolicy(N, [{ from: 'all', to: 'all' }]);
  for (let i = 0; i < size; i++)
    c.join(N, { id: `node${i}`, nodeKey: `key-${i}-${'x'.repeat(32)}`, tags: ['all'], endpoints: [`198.51.100.${i % 250}:51820`] });
  const members = c.members(N);
  const policy = new PolicyIndex(c.policy(N));
  const digests = members.map((m) => peerDigest(peerImage(m, SCOPE.REACH)));
  const sum = emptyDigest();
  for (const d of digests) addPeer(sum, d);
  const version = c.stateVersion(N);
  const shared = { dns: { nameservers: [], searchDomains: [], records: [] }, relays: { relays: [] }, routeGroups: { groups: [] } };
  members.forEach((m, i) => {
    const d = { peerSum: sum.peerSum, peerCount: sum.peerCount, components: { ...sum.components } };
    removePeer(d, digests[i]);
    const comps = componentsFor({ node: m, policy, shared, dns: shared.dns, routeGroups: shared.routeGroups, moduleOf: () => null });
    for (const [k, v] of Object.entries(comps)) d.components[k] = componentDigest(v);
    const hash = stateHash(d);
    store.putSync(N, m.id, {
      applied: version,
      appliedHash: hash,
      sent: version,
      expectations: [{ version, hash, digest: storeDigest(d) }],
      snapshotPending: false,
      recent: [],
      lastAgentHash: hash,
      firewallKind: '',
      held: 0,
      changed: 0,
    });
  });
  return { c: new Controller(store, { logDepth: 100 }), members };
}

const rows = [];
for (const size of sizes) {
  const t0 = Date.now();
  const { c, members } = network(size);
  const setup = Date.now() - t0;
  c.join(N, { id: 'newcomer', nodeKey: 'key-newcomer', tags: ['all'] });
  // Fan-out: every existing agent gets a delta (controller CPU), encoded with the generated code.
  const deltas = new Array(members.length);
  const ctl = cpu(() => {
    members.forEach((m, i) => {
      deltas[i] = c.deltaFor(N, m.id);
    });
  });
  let bytes = 0;
  const enc = cpu(() => {
    for (const d of deltas) bytes += StateDelta.encode(d).finish().length;
  });
  if (deltas.some((d) => d.fromVersion === 0 || d.upsertPeers.length !== 1)) throw new Error('expected one-peer deltas');
  const newcomer = StateDelta.encode(c.deltaFor(N, 'newcomer')).finish().length;
  // Full-state push: every agent gets its whole view. Measured on a sample, scaled to all agents.
  const sample = Math.min(members.length, Math.max(5, Math.floor(250_000 / size)));
  let fullBytes = 0;
  const full = cpu(() => {
    for (let i = 0; i < sample; i++)
      fullBytes += StateDelta.encode({ versionSignature: new Uint8Array(0), ...c.snapshotOf(N, members[i].id).delta }).finish().length;
  });
  const per = { bytes: bytes / members.length, us: (ctl.us + enc.us) / members.length, ctlUs: ctl.us / members.length };
  const fullPer = { bytes: fullBytes / sample, us: full.us / sample };
  rows.push({ size, per, fullPer });
  console.log(`\n${fmt(size)} nodes (setup ${fmt(setup / 1000)} s; full state sampled on ${sample} agents)`);
  console.log(
    `  fan-out of one join: ${fmt(bytes)} B total, ${fmt(per.bytes)} B per agent; CPU ${fmt((ctl.us + enc.us) / 1000)} ms total (controller ${fmt(ctl.us / 1000)} ms + encode ${fmt(enc.us / 1000)} ms), ${fmt(per.us)} µs per agent`,
  );
  console.log(`  the newcomer's own snapshot: ${fmt(newcomer)} B`);
  console.log(
    `  full-state push: ${fmt(fullPer.bytes * members.length)} B total, ${fmt(fullPer.bytes)} B per agent; CPU ${fmt((fullPer.us * members.length) / 1000)} ms total, ${fmt(fullPer.us)} µs per agent`,
  );
  console.log(`  ratio delta/full: bytes 1/${fmt(fullPer.bytes / per.bytes)}, CPU 1/${fmt(fullPer.us / per.us)}`);
}
if (rows.length > 1) {
  const a = rows[0],
    b = rows[rows.length - 1];
  console.log(
    `\nper-agent fan-out ${fmt(b.size)} vs ${fmt(a.size)}: bytes ×${(b.per.bytes / a.per.bytes).toFixed(2)}, CPU ×${(b.per.us / a.per.us).toFixed(2)} (goal ≤ 1.5×; bytes ≤ 512 B: ${b.per.bytes <= 512 ? 'yes' : 'no'})`,
  );
}

// Agent: one-peer delta applied (and hashed for the ack) on a large view vs a small one.
function agentWith(peers) {
  const a = new DeltaApplier({ limits: { maxPeers: 1_000_000 } });
  const upsertPeers = Array.from({ length: peers }, (_, i) => ({
    id: `p${i}`,
    nodeKey: `key-${i}`,
    addresses: [`100.96.${(i >> 8) & 255}.${i & 255}`],
    tags: ['all'],
    endpoints: [],
    inboundOnly: false,
  }));
  a.restore({ fromVersion: 0, toVersion: 1, upsertPeers, removePeers: [], network: N });
  return a;
}
function applyTime(peers, rounds) {
  const a = agentWith(peers);
  let v = 1;
  const one = () => {
    const r = a.receive({
      fromVersion: v,
      toVersion: v + 1,
      upsertPeers: [{ id: `p${v % peers}`, nodeKey: `rotated-${v}`, addresses: [], tags: ['all'], endpoints: [], inboundOnly: false }],
      removePeers: [],
      network: N,
    });
    v++;
    return r;
  };
  for (let i = 0; i < 200; i++) one();
  const t = process.hrtime.bigint();
  for (let i = 0; i < rounds; i++) one();
  return Number(process.hrtime.bigint() - t) / rounds / 1000;
}
const small = applyTime(1_000, 5_000);
const large = applyTime(250_000, 5_000);
console.log(
  `\nagent applying a one-peer delta (+ hash for the ack): 1,000-peer view ${small.toFixed(1)} µs, 250,000-peer view ${large.toFixed(1)} µs: ×${(large / small).toFixed(2)} (goal ≤ 1.5×)`,
);

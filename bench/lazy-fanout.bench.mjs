// Lazy fan-out, in-process against the controller library (MemoryStore; no gRPC fleet: 10,000 real
// agents do not fit this machine): one join, one policy change and one removal in networks of
// N memberships of which 1% can see the change. For each: messages, encoded bytes and controller
// CPU of what the controller sends now (only those whose view changed), against the same fleet
// where every agent gets a message (the unaffected an empty delta {from, to, network}, as before
// issue 14), ratio printed. The baseline's CPU is the same computation plus encoding the empty
// deltas; the N acks the old fan-out then received and wrote to its store are not counted, so the
// CPU ratio understates the old cost.
// Run after `npx tsc -b`: node bench/lazy-fanout.bench.mjs [sizes, default 1000,10000]
import { DeltaApplier } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { StateDelta } from '@meshp/protocol';

const sizes = (process.argv[2] ?? '1000,10000').split(',').map(Number);
const NET = 'bench';
const fmt = (n) => n.toLocaleString('en-US', { maximumFractionDigits: 1 });
const bytesOf = (d) => StateDelta.encode(StateDelta.fromPartial(d)).finish().length;

/** N members; 1% tagged g (g may reach g), the rest each in a tag no rule names. Every one has applied its view. */
function fleet(n) {
  const c = new Controller(new MemoryStore(), { logDepth: 100 });
  c.createNetwork(NET);
  c.setPolicy(NET, [{ from: 'g', to: 'g' }]);
  const seen = Math.max(1, Math.round(n / 100));
  for (let i = 0; i < n; i++) c.join(NET, { id: `n${i}`, nodeKey: `key-${i}`, tags: i < seen ? ['g'] : [`solo${i}`] });
  for (const m of c.members(NET)) {
    const a = new DeltaApplier();
    const r = a.receive(c.deltaFor(NET, m.id));
    c.ack(NET, m.id, r.ack.appliedVersion, r.ack.stateHash);
  }
  return { c, seen };
}

/** What the controller sends every member after the change (what pumping every stream does). */
function fanOut(c) {
  const t0 = process.cpuUsage();
  const sent = [];
  for (const m of c.members(NET)) {
    const d = c.deltaFor(NET, m.id);
    if (d) sent.push(d);
  }
  const lazyUs = cpuSince(t0);
  let bytes = 0;
  for (const d of sent) bytes += bytesOf(d);
  // The same fleet where every agent gets a message: the others an empty delta.
  const t1 = process.cpuUsage();
  const v = c.stateVersion(NET);
  let emptyBytes = 0;
  for (let i = sent.length; i < c.members(NET).length; i++)
    emptyBytes += bytesOf({ fromVersion: v - 1, toVersion: v, network: NET, upsertPeers: [], removePeers: [] });
  const extraUs = cpuSince(t1);
  return { messages: sent.length, bytes, us: lazyUs, all: { messages: c.members(NET).length, bytes: bytes + emptyBytes, us: lazyUs + extraUs } };
}

function cpuSince(t0) {
  const d = process.cpuUsage(t0);
  return d.user + d.system;
}

const changes = {
  join: (c) => c.join(NET, { id: 'late', nodeKey: 'key-late', tags: ['g'] }),
  'policy change': (c) => c.setPolicy(NET, [{ from: 'g', to: 'g', ports: ['443'] }]),
  removal: (c) => c.leave(NET, 'n0'),
};

for (const n of sizes) {
  console.log(`\nN = ${fmt(n)} memberships, ${fmt(Math.max(1, Math.round(n / 100)))} (1%) can see each change`);
  console.log('change          lazy: msgs   bytes   cpu ms | every agent: msgs     bytes   cpu ms | ratio msgs  bytes  cpu');
  for (const [name, change] of Object.entries(changes)) {
    const { c } = fleet(n);
    change(c);
    const r = fanOut(c);
    const row = [
      name.padEnd(14),
      fmt(r.messages).padStart(11),
      fmt(r.bytes).padStart(8),
      fmt(r.us / 1000).padStart(8),
      '|',
      fmt(r.all.messages).padStart(17),
      fmt(r.all.bytes).padStart(9),
      fmt(r.all.us / 1000).padStart(8),
      '|',
      `${fmt(r.all.messages / r.messages)}x`.padStart(10),
      `${fmt(r.all.bytes / r.bytes)}x`.padStart(6),
      `${fmt(r.all.us / r.us)}x`.padStart(5),
    ];
    console.log(row.join(' '));
  }
}

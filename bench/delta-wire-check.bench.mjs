// Issue 31, the controller's per-agent-delta cost, one piece at a time, each against its old way in
// the same run (ns per agent-delta, and the ratio). The join delta of an all-to-all network of 50.
// - size check: splitForWire's check of a delta under the limit (a bound, then the encoded length
//   only when the bound is over) against the old JSON byteLength of the whole delta.
// - log: a fan-out to AGENTS agents at the controller's level info, its log as the controller writes
//   it (pino, synchronous, to /dev/null here): one debug call per agent and one info line, against
//   the old info line per agent.
// - view hash: the hashes of one agent-delta's view (the one its revision expects and the one over
//   every field, the same at the current revision), computed once against twice as before; beside
//   the whole deltaFor of a join's fan-out in an all-to-all network of AGENTS_HASH, per agent.
// node bench/delta-wire-check.bench.mjs
import { Controller, MemoryStore } from '@meshp/controller';
import { StateDelta } from '@meshp/protocol';
import { splitForWire } from '../plugins/controller/dist/limits.js';
import { pino } from 'pino';
import { logOptions } from '@meshp/core/util';
import { digestOf, stateHash } from '@meshp/core/delta';

const c = new Controller(new MemoryStore());
c.createNetwork('n');
c.setPolicy('n', [{ from: 'a', to: 'a' }]);
for (let i = 0; i < 50; i++) c.join('n', { id: `p${i}`, nodeKey: `k${i}`, tags: ['a'], endpoints: [`10.0.0.${i}:51820`] });
const d0 = c.deltaFor('n', 'p0');
c.ack('n', 'p0', d0.toVersion, d0.stateHash);
c.join('n', { id: 'q', nodeKey: 'kq', tags: ['a'], endpoints: ['10.0.1.1:51820'] });
const delta = c.deltaFor('n', 'p0');
const budget = 2 * 1024 * 1024;

const N = 200_000;
function time(f) {
  for (let i = 0; i < 20_000; i++) f();
  const t = process.hrtime.bigint();
  for (let i = 0; i < N; i++) f();
  return Number(process.hrtime.bigint() - t) / N;
}
let sink = 0;
const oldCheck = time(() => {
  if (Buffer.byteLength(JSON.stringify(delta), 'utf8') <= budget) sink++;
});
const newCheck = time(() => {
  sink += splitForWire(delta, budget).length;
});
const encode = time(() => {
  if (StateDelta.encode(delta).finish().byteLength <= budget) sink++;
});
console.log(`join delta: ${Buffer.byteLength(JSON.stringify(delta))} B of JSON, ${StateDelta.encode(delta).finish().byteLength} B of protobuf`);
console.log(`size check: JSON byteLength ${oldCheck.toFixed(0)} ns, exact encode ${encode.toFixed(0)} ns, splitForWire now ${newCheck.toFixed(0)} ns`);
console.log(`size check, now / JSON: ${(newCheck / oldCheck).toFixed(2)}× (${sink > 0 ? 'ok' : ''})`);

const AGENTS = 1000;
const log = pino(logOptions('meshp-controller', 'info'), pino.destination({ dest: '/dev/null', sync: true }));
const line = (i) => ({ network: 'n', node: `p${i}`, fromVersion: 51, toVersion: 52, snapshot: false, upserts: 1, removals: 0 });
const FANOUTS = 200;
function timeFanout(f) {
  for (let r = 0; r < 20; r++) f();
  const t = process.hrtime.bigint();
  for (let r = 0; r < FANOUTS; r++) f();
  return Number(process.hrtime.bigint() - t) / FANOUTS / AGENTS;
}
const oldLog = timeFanout(() => {
  for (let i = 0; i < AGENTS; i++) log.info(line(i), 'delta sent');
});
const newLog = timeFanout(() => {
  for (let i = 0; i < AGENTS; i++) log.debug(line(i), 'delta sent');
  log.info({ network: 'n', agents: AGENTS, snapshots: 0, version: 52 }, 'fan-out sent');
});
console.log(`log of a fan-out to ${AGENTS}, per agent-delta: an info line each ${oldLog.toFixed(0)} ns, debug each and one info line ${newLog.toFixed(0)} ns`);
console.log(`log, now / an info line each: ${(newLog / oldLog).toFixed(3)}×`);

const AGENTS_HASH = 200;
const h = new Controller(new MemoryStore());
h.createNetwork('n');
h.setPolicy('n', [{ from: 'a', to: 'a' }]);
for (let i = 0; i < AGENTS_HASH; i++) h.join('n', { id: `p${i}`, nodeKey: `k${i}`, tags: ['a'], endpoints: [`10.0.0.${i % 250}:51820`] });
const ids = Array.from({ length: AGENTS_HASH }, (_, i) => `p${i}`);
for (const id of ids) {
  const d = h.deltaFor('n', id);
  h.ack('n', id, d.toVersion, d.stateHash);
}
// A snapshot's view (p0's at N = 50): the digest each agent-delta hashes.
const snap = d0;
const digest = digestOf(snap.upsertPeers, snap);
const twice = time(() => {
  sink += stateHash(digest).length + stateHash(digest).length;
});
const once = time(() => {
  sink += stateHash(digest).length;
});
let perDelta = 0;
for (let r = 0; r < 5; r++) {
  h.join('n', { id: `j${r}`, nodeKey: `kj${r}`, tags: ['a'], endpoints: ['10.0.2.1:51820'] });
  const t0 = process.hrtime.bigint();
  for (const id of ids) {
    const d = h.deltaFor('n', id);
    h.ack('n', id, d.toVersion, d.stateHash);
  }
  perDelta += Number(process.hrtime.bigint() - t0) / ids.length / 5;
}
console.log(
  `view hash per agent-delta: twice ${twice.toFixed(0)} ns, once ${once.toFixed(0)} ns; deltaFor and ack of a join at ${AGENTS_HASH}, per agent ${perDelta.toFixed(0)} ns`,
);
console.log(`view hash, once / twice: ${(once / twice).toFixed(2)}× (saves ${(((twice - once) / perDelta) * 100).toFixed(1)}% of deltaFor and ack)`);

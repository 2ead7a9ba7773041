// Issue 31 (ADR 0044): what a join's fan-out builds once for every agent, against building it per
// agent as before, in the same run, in one process. For N agents of an all-to-all network, each
// sent the one new peer: before, per agent, the peer's image, its digest (canonical JSON + sha256)
// and the generated encoder of the whole message; now one shared frozen image and digest
// (sharedPeer) and the transport's encoder writing the peer's bytes encoded once
// (encodeDeltaResponse). And the state hash: canonical JSON then sha256, against its text written
// directly. CPU per agent-delta, best of ROUNDS.
// node bench/fanout-shared.bench.mjs [sizes, default 1000,5000]
import { loadavg } from 'node:os';
import { SCOPE, emptyDigest, addPeer, peerDigest, peerImage, sharedPeer, sha256Hex, stateHash, stateHashTextCanonical } from '@meshp/core/delta';
import { encodeDeltaResponse } from '@meshp/transport-grpc';
import { SyncResponse } from '@meshp/protocol';

const sizes = (process.argv[2] ?? '1000,5000').split(',').map(Number);
const ROUNDS = 7;
const cpu = (f) => {
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const a = process.cpuUsage();
    f(r);
    const b = process.cpuUsage(a);
    best = Math.min(best, b.user + b.system);
  }
  return best;
};
const member = (r) => ({
  id: `late${r}`,
  nodeKey: `late-${r}-${'y'.repeat(40)}`,
  addresses: ['100.64.3.7'],
  tags: ['all'],
  endpoints: ['203.0.113.9:51820'],
  tunnelKey: 'k'.repeat(44),
  assigned: [],
  settings: { ports: {} },
  mode: 'adopted',
});
const message = (n, i, peer) => ({
  fromVersion: 1000 + n,
  toVersion: 1001 + n,
  upsertPeers: [peer],
  removePeers: [],
  network: 'bench',
  stateHash: (i.toString(16) + 'ab'.repeat(32)).slice(0, 64),
  versionSignature: new Uint8Array(32).fill(i & 255),
});
console.log(
  `one join to N agents, per agent-delta (best of ${ROUNDS}); load ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
console.log('N      | per agent: image+digest+encode µs | shared µs | ratio | state hash: canonical µs  direct µs  ratio');
for (const n of sizes) {
  const before = cpu((r) => {
    const m = member(r);
    for (let i = 0; i < n; i++) {
      const img = peerImage(m, SCOPE.REACH);
      const d = emptyDigest();
      addPeer(d, peerDigest(img));
      Buffer.from(SyncResponse.encode({ delta: message(n, i, img) }).finish());
    }
  });
  const after = cpu((r) => {
    const m = member(r + 100);
    for (let i = 0; i < n; i++) {
      const e = sharedPeer(m, SCOPE.REACH);
      const d = emptyDigest();
      addPeer(d, e.digest);
      encodeDeltaResponse(message(n, i, e.peer));
    }
  });
  const digests = Array.from({ length: n }, (_, i) => ({
    peerSum: BigInt(i) * 7919n,
    peerCount: n,
    components: { dns: 'a'.repeat(64), filter: 'b'.repeat(64), routeGroups: null, relays: null, tunnel: 'c'.repeat(64), declaration: null },
  }));
  const hOld = cpu(() => digests.forEach((d) => sha256Hex(stateHashTextCanonical(d))));
  const hNew = cpu(() => digests.forEach((d) => stateHash(d)));
  const f = (us) => (us / n).toFixed(2).padStart(6);
  console.log(
    `${String(n).padEnd(6)} | ${f(before).padStart(33)} | ${f(after).padStart(9)} | ${(after / before).toFixed(2)}× | ${f(hOld).padStart(22)} ${f(hNew).padStart(10)}  ${(hNew / hOld).toFixed(2)}×`,
  );
}

// The controller's V8 CPU profile (`--cpu-prof`) during one change's window, in buckets of its
// main thread's CPU (fanout-floor.bench.mjs --profile). A sample's time goes to the innermost frame
// of its stack that names a bucket (a sha256 inside the delta build is the hash's, an encode inside
// grpc-js's write is protobuf's); `(program)` is native code outside any JS frame (OpenSSL's TLS
// records, nghttp2's framing, libuv), `(garbage collector)` GC, `(idle)` is left out of the shares.
// The window is on CLOCK_MONOTONIC in µs: the clock both V8's profile timestamps and Node's
// process.hrtime are on (Linux), so the bench's own marks select the samples.
import { readFileSync } from 'node:fs';

/** Bucket by the innermost frame matching; the order is the test order within a frame. */
const RULES = [
  [
    'HMAC/hash',
    (f) =>
      /node:internal\/crypto\/(hash|hmac|sig|keys)/.test(f.url) ||
      (/^(createHash|createHmac|digest|update|sign|hash)$/.test(f.functionName) && f.url.startsWith('node:internal/crypto')),
  ],
  ['protobuf encode/decode', (f) => /protobufjs|@bufbuild|long\/|\/wire\/|delta-encode|generated/.test(f.url)],
  ['sync flush (record, SQLite)', (f) => /better-sqlite3|state-sqlite|store-postgres|sync-row|sqlite/.test(f.url)],
  ['log (pino)', (f) => /pino|sonic-boom/.test(f.url)],
  ['grpc-js JS', (f) => /@grpc\/grpc-js/.test(f.url)],
  ['node http2/tls/net/stream JS', (f) => /^node:(internal\/http2|_tls|tls|net|internal\/stream|internal\/streams|_stream|stream|internal\/tls)/.test(f.url)],
  ['delta build (scope, compute, digests, canonical JSON)', (f) => /core\/dist\/delta|core\/src\/delta/.test(f.url)],
  ['transport-grpc (hub, sync stream)', (f) => /transport-grpc\//.test(f.url)],
  ['controller (hub, store, fan-out)', (f) => /plugins\/controller\/|@meshp\/controller/.test(f.url)],
  ['other meshp', (f) => /\/(core|lib|plugins|bin)\/dist\//.test(f.url)],
  ['node other JS (timers, events, buffer)', (f) => f.url.startsWith('node:')],
];
const SPECIAL = {
  '(garbage collector)': 'GC',
  '(program)': 'native outside JS (TLS records, nghttp2, libuv)',
  '(idle)': '(idle)',
  '(root)': 'native outside JS (TLS records, nghttp2, libuv)',
};

/** { total µs, buckets: [[name, µs, share]], top: [[function (file:line), self µs]] } over [startUs, endUs]. */
export function bucketProfile(file, startUs, endUs) {
  const p = JSON.parse(readFileSync(file, 'utf8'));
  const byId = new Map(p.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const bucketOf = new Map();
  const bucket = (id) => {
    if (bucketOf.has(id)) return bucketOf.get(id);
    const n = byId.get(id);
    let b = SPECIAL[n.callFrame.functionName];
    if (!b || b === SPECIAL['(root)']) {
      for (let cur = id; cur !== undefined && !b; cur = parent.get(cur)) {
        const f = byId.get(cur).callFrame;
        for (const [name, test] of RULES)
          if (test(f)) {
            b = name;
            break;
          }
      }
      // A native binding called from JS and named by no rule (e.g. a bare `writev`) is JS-side native code.
      b ??= SPECIAL[n.callFrame.functionName] ?? 'other (native via JS, unnamed)';
    }
    bucketOf.set(id, b);
    return b;
  };
  const totals = new Map();
  const self = new Map();
  let t = p.startTime;
  let total = 0;
  let idle = 0;
  for (let i = 0; i < p.samples.length; i++) {
    const dt = p.timeDeltas[i] ?? 0;
    t += dt;
    if (t < startUs || t > endUs) continue;
    // A sample's time: the gap to the next sample (what it stood for).
    const us = p.timeDeltas[i + 1] ?? dt;
    const id = p.samples[i];
    const b = bucket(id);
    if (b === '(idle)') {
      idle += us;
      continue;
    }
    total += us;
    totals.set(b, (totals.get(b) ?? 0) + us);
    const f = byId.get(id).callFrame;
    const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/(node_modules|dist)\//, '')}:${f.lineNumber + 1}`;
    self.set(key, (self.get(key) ?? 0) + us);
  }
  const buckets = [...totals].sort((a, b) => b[1] - a[1]).map(([name, us]) => [name, us, us / total]);
  const top = [...self].sort((a, b) => b[1] - a[1]).slice(0, 20);
  return { totalUs: total, idleUs: idle, buckets, top, profileStartUs: p.startTime, profileEndUs: p.endTime };
}

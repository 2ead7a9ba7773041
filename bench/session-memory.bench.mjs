// Issue 31: what one idle agent's connection costs a server, by layer, in the same run: a bare TLS
// server, node:http2's secure server (one stream a session), grpc-js with the controller's options,
// and grpc-js with the options tried (grpc-node.max_session_memory, grpc.max_concurrent_streams:
// the HTTP/2 settings grpc-js passes on). Each server in its own process; N clients' connections
// held open; RSS and heap per connection after a full GC, net of the server before the clients.
// node bench/session-memory.bench.mjs [N, default 1000]
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ensureCertificate } from '@meshp/controller';

const here = fileURLToPath(new URL('.', import.meta.url));
const n = Number(process.argv[2] ?? 1000);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
process.setMaxListeners(0);
const H2_TUNED = { maxSessionMemory: 1, settings: { headerTableSize: 256, initialWindowSize: 16384, maxHeaderListSize: 8192 } };
const TUNED = { 'grpc-node.max_session_memory': 1, 'grpc.max_concurrent_streams': 4 };

function child(file, args, env = {}) {
  const c = fork(join(here, 'session-memory', file), args, {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    execArgv: ['--expose-gc'],
    env: { ...process.env, ...env },
  });
  process.once('exit', () => c.kill('SIGKILL'));
  let next = 0;
  const waiting = new Map();
  c.on('message', (m) => {
    waiting.get(m.id)?.(m);
    waiting.delete(m.id);
  });
  const call = (cmd, a = {}) => new Promise((resolve) => (waiting.set(next, resolve), c.send({ id: next++, cmd, ...a })));
  return { c, call };
}

const dir = mkdtempSync(join(tmpdir(), 'meshp-session-memory-'));
const tls = ensureCertificate(dir);
const rows = [];
for (const [kind, env] of [
  ['tls', {}],
  ['http2', {}],
  ['http2-tuned', { OPTIONS: JSON.stringify(H2_TUNED) }],
  ['grpc', {}],
  ['grpc-tuned', { OPTIONS: JSON.stringify(TUNED) }],
]) {
  const server = child('server.mjs', [kind], env);
  const bare = await server.call('listen', { certPem: tls.certPem, keyPem: tls.keyPem });
  const clients = Array.from({ length: Math.ceil(n / 500) }, () => child('client.mjs', []));
  await Promise.all(clients.map((c, k) => c.call('open', { kind, port: bare.port, count: Math.min(500, n - k * 500) })));
  let m;
  for (let i = 0; i < 100; i++) {
    await sleep(300);
    m = await server.call('measure');
    if (m.held >= n) break;
  }
  await sleep(1000);
  m = await server.call('measure');
  rows.push({ kind, held: m.held, rss: (m.rss - bare.rss) / n / 1024, heap: (m.heap - bare.heap) / n / 1024, ext: (m.external - bare.external) / n / 1024 });
  for (const c of clients) c.c.send({ cmd: 'close' });
  server.c.send({ cmd: 'close' });
  await sleep(500);
}
rmSync(dir, { recursive: true, force: true });
console.log(
  `${n} idle connections held by one server process; per connection, net of the server before them, after a full GC; load ${loadavg()
    .map((x) => x.toFixed(2))
    .join(' ')}`,
);
console.log('server                         held  RSS KB  JS heap KB  external KB');
for (const r of rows)
  console.log(
    `${r.kind.padEnd(30)} ${String(r.held).padStart(5)} ${r.rss.toFixed(1).padStart(7)} ${r.heap.toFixed(1).padStart(11)} ${r.ext.toFixed(1).padStart(12)}`,
  );
console.log(`grpc-tuned: ${JSON.stringify(TUNED)}; http2-tuned: ${JSON.stringify(H2_TUNED)}`);
process.exit(0);

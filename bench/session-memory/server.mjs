// One server kind of session-memory.bench.mjs (issue 31): `tls` (a bare TLS server, nothing read),
// `http2` (node:http2's secure server, one stream a session held open), `grpc` (grpc-js with the
// controller's serverOptions, one bidi Sync-like stream a session) or `grpc-tuned` (the same with the
// options tried: OPTIONS, JSON, merged over serverOptions). Over IPC: listen → { port }; after the
// clients are in, 'measure' → its RSS and heap after a full GC (run with --expose-gc).
import { createServer as tlsServer } from 'node:tls';
import { createSecureServer } from 'node:http2';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { serverOptions } from '@meshp/transport-grpc';

const kind = process.argv[2];
const extra = JSON.parse(process.env.OPTIONS ?? '{}');
const held = [];
const mem = () => {
  globalThis.gc?.();
  globalThis.gc?.();
  const m = process.memoryUsage();
  return { rss: m.rss, heap: m.heapUsed, external: m.external, arrayBuffers: m.arrayBuffers };
};
const id = (b) => b;
process.on('message', (m) => {
  if (m.cmd === 'measure') return process.send({ id: m.id, held: held.length, ...mem() });
  if (m.cmd === 'close') process.exit(0);
  if (m.cmd !== 'listen') return;
  const key = Buffer.from(m.keyPem);
  const cert = Buffer.from(m.certPem);
  const ready = (port) => process.send({ id: m.id, port, ...mem() });
  if (kind === 'tls') {
    const s = tlsServer({ key, cert }, (sock) => held.push(sock));
    s.listen(0, '127.0.0.1', () => ready(s.address().port));
  } else if (kind === 'http2' || kind === 'http2-tuned') {
    const s = createSecureServer({ key, cert, ...(kind === 'http2-tuned' ? extra : {}) });
    s.on('stream', (stream) => {
      held.push(stream);
      stream.respond({ ':status': 200, 'content-type': 'application/grpc' });
      stream.on('data', () => undefined);
    });
    s.listen(0, '127.0.0.1', () => ready(s.address().port));
  } else {
    const server = new Server({ ...serverOptions(), ...(kind === 'grpc-tuned' ? extra : {}) });
    const def = {
      path: '/floor.Floor/Sync',
      requestStream: true,
      responseStream: true,
      requestSerialize: id,
      requestDeserialize: id,
      responseSerialize: id,
      responseDeserialize: id,
    };
    server.addService({ sync: def }, { sync: (call) => (held.push(call), call.on('data', () => undefined)) });
    const creds = ServerCredentials.createSsl(null, [{ private_key: key, cert_chain: cert }], false);
    server.bindAsync('127.0.0.1:0', creds, (err, port) => ready(port));
  }
});

// The transport's floor (issue 31): a bare grpc-js server with the controller's TLS (its own
// certificate kind, ensureCertificate) and its server options (serverOptions), one bidi method with
// no codec (the message is a pre-encoded Buffer). On { cmd: 'fanout', bytes, rounds } it writes one
// message of that size to every open stream, waits for each stream's ack, `rounds` times, and answers
// when all are in. Driven by fanout-floor.bench.mjs over IPC; its CPU and RSS are read from /proc there.
import { Server, ServerCredentials } from '@grpc/grpc-js';
import { serverOptions } from '@meshp/transport-grpc';

const id = (b) => b;
const service = {
  sync: {
    path: '/floor.Floor/Sync',
    requestStream: true,
    responseStream: true,
    requestSerialize: id,
    requestDeserialize: id,
    responseSerialize: id,
    responseDeserialize: id,
  },
};
const streams = new Set();
let waiting = 0;
let done = null;
const server = new Server(serverOptions());
server.addService(service, {
  sync: (call) => {
    call.on('data', (b) => {
      if (b.length > 0 && b[0] === 1) {
        streams.add(call);
        process.send({ opened: streams.size });
      } else if (waiting > 0 && --waiting === 0) done();
    });
    call.on('error', () => streams.delete(call));
    call.on('end', () => {
      streams.delete(call);
      call.end();
    });
  },
});
process.on('message', async (m) => {
  if (m.cmd === 'listen') {
    const creds = ServerCredentials.createSsl(null, [{ private_key: Buffer.from(m.keyPem), cert_chain: Buffer.from(m.certPem) }], false);
    server.bindAsync('127.0.0.1:0', creds, (err, port) => process.send({ id: m.id, port, error: err?.message }));
  } else if (m.cmd === 'fanout') {
    const msg = Buffer.alloc(m.bytes, 7);
    for (let r = 0; r < m.rounds; r++) {
      await new Promise((resolve) => {
        done = resolve;
        waiting = streams.size;
        for (const s of streams) s.write(msg);
      });
    }
    process.send({ id: m.id, streams: streams.size });
  } else if (m.cmd === 'close') {
    server.forceShutdown();
    process.exit(0);
  }
});

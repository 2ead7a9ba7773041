// The floor's agents (fanout-floor.bench.mjs): each its own channel with its own pinned credentials
// (one TLS connection and HTTP/2 session each, as an agent has) and the agents' channel options, one
// bidi stream; a message received is answered with an ack of `ackBytes`, as an agent acks a delta.
import { Client } from '@grpc/grpc-js';
import { channelOptions, pinnedCredentials } from '@meshp/transport-grpc';

const id = (b) => b;
const calls = [];
process.on('message', async (m) => {
  if (m.cmd === 'open') {
    const ack = Buffer.alloc(m.ackBytes, 2);
    for (let i = 0; i < m.count; i++) {
      const c = new Client(`127.0.0.1:${m.port}`, pinnedCredentials(m.certPem, m.fingerprint), channelOptions());
      const call = c.makeBidiStreamRequest('/floor.Floor/Sync', id, id);
      call.on('data', () => call.write(ack));
      call.on('error', () => undefined);
      call.write(Buffer.from([1]));
      calls.push({ c, call });
      if (i % 50 === 49) await new Promise((r) => setImmediate(r));
    }
    process.send({ id: m.id });
  } else if (m.cmd === 'close') {
    for (const { c, call } of calls) {
      call.end();
      c.close();
    }
    process.exit(0);
  }
});

// session-memory.bench.mjs's clients: COUNT TLS connections to the server, each (but for `tls`) one
// HTTP/2 session with one gRPC-shaped stream open (POST, application/grpc, one 5-byte-framed message).
import { connect as tlsConnect } from 'node:tls';
import { connect } from 'node:http2';

const held = [];
process.on('message', async (m) => {
  if (m.cmd === 'close') process.exit(0);
  if (m.cmd !== 'open') return;
  for (let i = 0; i < m.count; i++) {
    if (m.kind === 'tls') {
      await new Promise((r) => held.push(tlsConnect({ host: '127.0.0.1', port: m.port, rejectUnauthorized: false }, r)));
    } else {
      const s = connect(`https://127.0.0.1:${m.port}`, { rejectUnauthorized: false });
      s.on('error', () => undefined);
      const st = s.request({ ':method': 'POST', ':path': '/floor.Floor/Sync', 'content-type': 'application/grpc', te: 'trailers' });
      st.on('error', () => undefined);
      st.on('data', () => undefined);
      st.write(Buffer.from([0, 0, 0, 0, 1, 1]));
      held.push(s, st);
      if (i % 20 === 19) await new Promise((r) => setTimeout(r, 5));
    }
  }
  process.send({ id: m.id });
});

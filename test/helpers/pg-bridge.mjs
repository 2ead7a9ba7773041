// The replicas' way into a PostgreSQL that listens inside a network namespace of the test's
// (store-postgres-partition.test.ts): run inside that namespace, it takes connections on a unix
// socket in the test's folder (a path: reachable from the root namespace, which keeps its routes
// as they are) and carries each over TCP to PostgreSQL on the namespace's loopback, where the
// test's nft rules can drop it. Bytes are passed as they come; nothing is read or answered here.
// usage: node pg-bridge.mjs SOCKET_PATH TCP_PORT
import { createServer, connect } from 'node:net';

const [path, port] = process.argv.slice(2);
const server = createServer((c) => {
  const up = connect(Number(port), '127.0.0.1');
  c.pipe(up);
  up.pipe(c);
  const end = () => {
    c.destroy();
    up.destroy();
  };
  c.on('error', end).on('close', end);
  up.on('error', end).on('close', end);
});
server.listen(path, () => process.stdout.write('listening\n'));

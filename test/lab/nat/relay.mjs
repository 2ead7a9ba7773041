// One relayed path inside a node's namespace (relay-proxy.ts): prints its relayed and local
// addresses, then takes the peer's relayed address on stdin; prints its counts on request.
import { createInterface } from 'node:readline';
import { RelayProxy } from '@meshp/tunnel-wireguard';

const conf = JSON.parse(process.argv[2]);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
let proxy;
try {
  proxy = await RelayProxy.open(conf);
} catch (e) {
  out({ msg: 'failed', err: e.message });
  process.exit(1);
}
out({ msg: 'ready', relayed: proxy.relayedAddress, local: proxy.localEndpoint });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line);
  if (m.op === 'connect') proxy.connect(m.peer);
  out({ msg: 'ok', id: m.id, counts: proxy.counts });
}
await proxy.close();

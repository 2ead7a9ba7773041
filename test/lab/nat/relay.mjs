// One relay allocation inside a node's namespace (relay-proxy.ts): prints its relayed address, then
// takes a peer's relayed address on stdin and answers the loopback endpoint for it; counts on request.
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
out({ msg: 'ready', relayed: proxy.relayedAddress });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line);
  const local = m.op === 'connect' ? await proxy.peer(m.peer) : undefined;
  out({ msg: 'ok', id: m.id, local, counts: proxy.counts });
}
await proxy.close();

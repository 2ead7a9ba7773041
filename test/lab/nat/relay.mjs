// One relay allocation inside a node's namespace (relay-proxy.ts): prints its relayed address, then
// takes a peer's relayed address on stdin (refused: asked three times, and says the sockets it holds) and answers the loopback endpoint for it; counts on request.
import { createInterface } from 'node:readline';
import { readdirSync, readlinkSync } from 'node:fs';
import { RelayProxy } from '@meshp/tunnel-wireguard';

const conf = JSON.parse(process.argv[2]);
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
/** The sockets this process holds (what a refused allocation must not leave behind). */
const sockets = () =>
  readdirSync('/proc/self/fd').filter((fd) => {
    try {
      return readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:');
    } catch {
      return false;
    }
  }).length;
const held = sockets();
let proxy;
try {
  proxy = await RelayProxy.open(conf);
} catch (e) {
  // Refused: asked twice more, as the node's agent asks a relay again; then what it holds.
  for (let i = 0; i < 2; i++) await RelayProxy.open(conf).catch(() => undefined);
  out({ msg: 'failed', err: e.message, socketsBefore: held, socketsAfter: sockets() });
  process.exit(1);
}
out({ msg: 'ready', relayed: proxy.relayedAddress });
for await (const line of createInterface({ input: process.stdin })) {
  const m = JSON.parse(line);
  const local = m.op === 'connect' ? await proxy.peer(m.peer) : undefined;
  out({ msg: 'ok', id: m.id, local, counts: proxy.counts });
}
await proxy.close();

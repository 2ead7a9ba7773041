// The mesh's resolver alone, for bench/dns-resolver.bench.mjs: a host with the dns-resolver plugin
// answering a view of N peers on 127.0.0.1 (a port of its own), in a process of its own so the load
// generator does not share its event loop. Prints {"port": P} once answering; exits on stdin's end.
// usage: node bench/dns/resolver.mjs N
import { Host } from '@meshp/core/host';
import { DeltaApplier } from '@meshp/core/delta';
import { DnsResolverPlugin } from '@meshp/dns-resolver';
import { peer } from './view.mjs';

const n = Number(process.argv[2]);
const plugin = new DnsResolverPlugin({ listenAddress: '127.0.0.1', port: 0, root: '/nonexistent' });
new Host({ stateDir: '/nonexistent', root: '/nonexistent' }).use(plugin);
const applier = new DeltaApplier();
applier.receive({ fromVersion: 0, toVersion: 1, network: 'bench', upsertPeers: Array.from({ length: n }, (_, i) => peer(i)), removePeers: [] });
await plugin.attach(applier.view);
process.stdout.write(JSON.stringify({ port: plugin.status().port, names: plugin.status().names }) + '\n');
process.stdin.resume();
process.stdin.on('end', () => plugin.close().then(() => process.exit(0)));

/**
 * The tunnel's own forwarded path on an exit node (issue 26, ADRs 0038 and 0039), in namespaces: a
 * "mesh" side with two sources (100.96.0.2, tagged `user`, allowed `route:out`; 100.96.0.3, tagged
 * `other`, allowed only the node's own port 9000) wired to the exit node by an interface named as its
 * tunnel, and an "internet" host behind it. The exit node loads the tunnel filter's table for a group
 * of 0.0.0.0/0 and ::/0 and publishes port 9000 by a DNAT to the internet host's port, as Docker
 * publishes a container's port. The group's prefixes hold every address, the DNAT'd one too: the
 * tunnel's forward chain judges only what the peers route through the node, so the published port
 * still reaches its target from a peer that may not use the exit node, while that peer sends
 * nothing else through it and the allowed one does.
 */
import t from 'tap';
import type { Peer } from '@meshp/core';
import { TunnelFilter } from '@meshp/tunnel-wireguard';
import { labAvailable, netns, runPrefix, wire, type Netns } from '../helpers/netns.js';
import { until } from '../helpers/budget.js';

const INET_HOST = '203.0.113.7';
const INET_PORT = 8443;
const PUBLISHED = 9000;

const peer = (id: string, address: string, tag: string): Peer => ({
  id,
  nodeKey: 'ed',
  addresses: [address],
  tags: [tag],
  endpoints: [],
  inboundOnly: false,
  tunnelKey: '',
});

/** Who the internet host says connected, or null: a TCP connection from `source` to host:port. */
const connect = (mesh: Netns, source: string, host: string, port: number) =>
  mesh
    .exec(process.execPath, [
      '-e',
      `const s = require('net').connect({ host: '${host}', port: ${port}, localAddress: '${source}' }); let d = ''; s.on('data', (x) => (d += x)); s.on('end', () => { console.log(d.trim()); process.exit(0); }); s.on('error', () => process.exit(1)); setTimeout(() => process.exit(1), 1000);`,
    ])
    .then(
      (r) => r.stdout.trim() || null,
      () => null,
    );

t.test(
  "an exit node's tunnel filter forwards from the allowed peer to anywhere, from another to nothing but the node's published port",
  { skip: labAvailable() ? false : 'needs root for namespaces' },
  async (t) => {
    const p = runPrefix('exf');
    const mesh = await netns(t, `${p}m`);
    const exit = await netns(t, `${p}e`);
    const inet = await netns(t, `${p}i`);
    await wire(exit, '100.96.0.1/24', mesh, '100.96.0.2/24', `${p}t`);
    await mesh.exec('ip', ['addr', 'add', '100.96.0.3/24', 'dev', `${p}tb`]);
    await mesh.exec('ip', ['route', 'add', 'default', 'via', '100.96.0.1']);
    await wire(exit, '203.0.113.1/24', inet, `${INET_HOST}/24`, `${p}n`);
    await inet.exec('ip', ['route', 'add', '100.96.0.0/24', 'via', '203.0.113.1']);
    await exit.exec('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
    const server = `require('net').createServer((s) => { s.on('error', () => {}); s.end(s.remoteAddress + '\\n'); }).listen(${INET_PORT}, '${INET_HOST}')`;
    const [cmd, argv] = inet.wrap(process.execPath, ['-e', server]);
    const { spawn } = await import('node:child_process');
    const child = spawn(cmd, argv, { stdio: 'ignore' });
    t.teardown(() => void child.kill('SIGKILL'));
    await until('the internet host serving', async () => (await inet.exec('ss', ['-ltn'])).stdout.includes(`:${INET_PORT}`), 30, 100);

    // The exit node publishes port 9000 (a DNAT, as Docker's), and loads the tunnel's own table.
    const iif = `${p}ta`;
    await exit.exec(
      'nft',
      ['-f', '-'],
      `table ip publish {\n chain pre { type nat hook prerouting priority dstnat; iifname "${iif}" tcp dport ${PUBLISHED} dnat to ${INET_HOST}:${INET_PORT}; }\n}\n`,
    );
    t.equal(await connect(mesh, '100.96.0.3', '100.96.0.1', PUBLISHED), '100.96.0.3', 'without the tunnel filter, the published port reaches its target');
    const filter = new TunnelFilter(iif);
    const script = filter.rebuild(
      {
        rules: [
          { sourceTags: ['user'], destinationTags: ['route:out'], ports: [] },
          { sourceTags: ['other'], destinationTags: ['exit'], ports: [`${PUBLISHED}/tcp`] },
        ],
      },
      [peer('a1', '100.96.0.2', 'user'), peer('a2', '100.96.0.3', 'other')],
      [],
      [{ name: 'out', prefixes: ['0.0.0.0/0', '::/0'], viaPeers: ['e'], noMasquerade: false }],
    );
    await exit.exec('nft', ['-f', '-'], script.join('\n') + '\n');

    t.equal(
      await connect(mesh, '100.96.0.2', INET_HOST, INET_PORT),
      '100.96.0.2',
      'the peer allowed route:out reaches the internet host through the exit node',
    );
    t.equal(await connect(mesh, '100.96.0.3', INET_HOST, INET_PORT), null, 'the other does not');
    t.equal(
      await connect(mesh, '100.96.0.3', '100.96.0.1', PUBLISHED),
      '100.96.0.3',
      "but reaches the exit node's published port: its DNAT is not a route through the node",
    );
    t.equal(await connect(mesh, '100.96.0.2', '100.96.0.1', PUBLISHED), '100.96.0.2', 'as does the allowed one');
  },
);

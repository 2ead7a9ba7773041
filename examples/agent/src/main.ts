#!/usr/bin/env node
/**
 * An agent assembled from chosen plugins: files and nftables, no container runtime.
 *   my-agent STATE_DIR CONTROLLER_HOST:PORT [TOKEN]
 * The token is needed on the first start only; the node's key and its enrolment stay in STATE_DIR.
 */
import { createPrivateKey, createPublicKey, generateKeyPairSync, sign } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { Host } from '@meshp/core/host';
import { Agent, decodeToken } from '@meshp/core/agent';
import { ProcFactsPlugin } from '@meshp/facts-proc';
import { LocalFilesPlugin } from '@meshp/files-local';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { SqliteStatePlugin } from '@meshp/state-sqlite';
import { GrpcTransportPlugin } from '@meshp/transport-grpc';

const [stateDir = '/var/lib/my-agent', address = '127.0.0.1:7443', token] = process.argv.slice(2);
mkdirSync(stateDir, { recursive: true, mode: 0o700 });

// The node's Ed25519 key (0600) and the controller's pinned fingerprint, kept from the first start.
const keyFile = join(stateDir, 'node.key');
if (!existsSync(keyFile)) writeFileSync(keyFile, generateKeyPairSync('ed25519').privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
const key = createPrivateKey(readFileSync(keyFile));
const pinFile = join(stateDir, 'controller.pin');
if (token) writeFileSync(pinFile, decodeToken(token).claims.fingerprint);
const fingerprint = readFileSync(pinFile, 'utf8').trim();

// The assembly: which plugins this agent is made of.
const host = new Host({ stateDir, root: '/', firewall: 'auto' }).use(
  new SqliteStatePlugin(),
  new LocalFilesPlugin(),
  new NftablesPlugin(),
  // The machine's listening sockets and addresses: what the converge preview and genesis read.
  new ProcFactsPlugin(),
  new GrpcTransportPlugin(),
);

const agent = new Agent(host, (await host.transport()).connect({ address, fingerprint }), {
  node: hostname(),
  token,
  nodeKey: createPublicKey(key).export({ type: 'spki', format: 'der' }).toString('base64'),
  sign: (payload) => sign(null, payload, key),
  log: { info: (f, m) => console.log(m, f), warn: (f, m) => console.warn(m, f), error: (f, m) => console.error(m, f) },
});
await agent.start();
process.once('SIGTERM', () => void agent.stop().then(() => host.close()));
process.once('SIGINT', () => void agent.stop().then(() => host.close()));

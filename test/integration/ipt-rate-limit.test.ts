/**
 * A found firewall's SYN rate limit holds for the mesh's port (issue 32): INPUT sends every SYN to
 * a SYN_FLOOD chain that RETURNs what is under a limit (hashlimit, limit) and drops the rest. The
 * opening must go after that jump (iptables and OpenWrt fw4's nft `limit rate … return`), so a real burst of 150 SYNs to the mesh port is answered as
 * rarely as one to the found firewall's own port; placed above the jump, all 150 were answered.
 */
import { writeFile, mkdtemp, rm } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { FirewallDriver, Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { verifyOpenings } from '@meshp/core/reconcile';
import { IptablesPlugin, nsenterRunner } from '@meshp/firewall-iptables';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { fixture } from '../helpers/corpus.js';
import { reaper, tool, type Backend } from '../helpers/ipt-lab.js';
import { labAvailable, netns, runPrefix, wire, type Netns } from '../helpers/netns.js';

const SERVER = '10.80.1.1';
const MESH_PORT = 7443;
const BURST = 150;

/** Listens on the ports with a deep backlog (a full accept queue would drop SYNs itself). */
const LISTENER = String.raw`
const net = require('node:net');
for (const p of process.argv.slice(2)) net.createServer((s) => s.destroy()).listen({ port: Number(p), host: '0.0.0.0', backlog: 4096 });
setTimeout(() => console.log('ready'), 200);
`;

/** Sends `count` SYNs at once (one connect each, given up after 600 ms, before a retransmit) and prints how many were answered. */
const BURSTER = String.raw`
const net = require('node:net');
const [host, port, count] = process.argv.slice(2);
let answered = 0, done = 0;
for (let i = 0; i < Number(count); i++) {
  const s = net.connect({ host, port: Number(port) });
  const end = () => { s.destroy(); if (++done === Number(count)) console.log(answered); };
  s.once('connect', () => { answered++; end(); });
  s.once('error', end);
  s.setTimeout(600, end);
}
`;

async function node(ns: Netns, file: string, args: string[]): Promise<string> {
  return (await ns.exec(process.execPath, [file, ...args])).stdout.trim();
}

/** The rules of the chain the opening goes into, in order. */
async function inputRules(server: Netns, backend: Backend | null): Promise<string[]> {
  if (backend === null) return (await server.exec('nft', ['list', 'chain', 'inet', 'fw4', 'input'])).stdout.split('\n').map((l) => l.trim());
  return (await server.exec(tool(backend, 4, 'save'), ['-t', 'filter'])).stdout.split('\n').filter((l) => l.startsWith('-A INPUT'));
}

/** One fixture on one backend (null: nftables). */
async function check(tt: Test, backend: Backend | null, name: string): Promise<void> {
  const p = runPrefix('rl');
  const server = await netns(tt, `${p}s`);
  const client = await netns(tt, `${p}c`);
  await wire(server, `${SERVER}/24`, client, '10.80.1.2/24', `${p}1`);
  const dir = await mkdtemp(join(tmpdir(), `${p}-`));
  tt.teardown(() => rm(dir, { recursive: true, force: true }));
  const [listener, burster] = [join(dir, 'listen.cjs'), join(dir, 'burst.cjs')];
  await writeFile(listener, LISTENER);
  await writeFile(burster, BURSTER);
  const f = fixture(name);
  tt.comment(`${name}: ${f.source}`);
  if (backend === null) await server.exec('nft', ['-f', '-'], f.text);
  else await server.exec(tool(backend, 4, 'restore'), [], f.text);
  const child = spawn('nsenter', [`--net=${server.path}`, '--', process.execPath, listener, '22', String(MESH_PORT)], { stdio: ['ignore', 'pipe', 'inherit'] });
  reaper(tt).push(child);
  await new Promise((r) => child.stdout.once('data', r));

  const root = await mkdtemp(join(tmpdir(), `${p}-root-`));
  tt.teardown(() => rm(root, { recursive: true, force: true }));
  const plugin =
    backend === null
      ? new NftablesPlugin({ netns: server.name, privateRange: '10.80.0.0/16' })
      : new IptablesPlugin({ runner: nsenterRunner(server.path), backends: [backend], privateRange: '10.80.0.0/16' });
  const driver = (await new Host({ root, firewall: 'auto' }).use(plugin).firewall()) as FirewallDriver;
  const web: Opening = {
    id: 'web/incoming/tcp/7443',
    module: 'web',
    port: MESH_PORT,
    protocol: 'tcp',
    from: ['10.80.0.0/16'],
    path: 'incoming',
    action: 'accept',
  };
  tt.same((await driver.ensure([web], [])).refused ?? [], [], 'placed');
  const input = await inputRules(server, backend);
  const jump = input.findIndex((l) => /-j SYN_FLOOD|jump syn_flood/.test(l));
  const accept = input.findIndex((l) => l.includes('meshp:web/incoming/tcp/7443'));
  tt.ok(jump >= 0 && accept > jump, `the accept goes after the jump to SYN_FLOOD:\n${input.join('\n')}`);
  const verdict = (await verifyOpenings(driver, [web])).get(web.id);
  tt.equal(verdict?.state, 'unverified', 'written; the walk cannot read the limit and says so');
  tt.match(verdict?.reason, backend === null ? /syn_flood/ : /SYN_FLOOD .*-j RETURN/, `the limit is named: ${verdict?.reason}`);

  const own = Number(await node(client, burster, [SERVER, '22', String(BURST)]));
  // The limit is per source (hashlimit) or global (limit): let its bucket fill again before the next burst.
  await new Promise((r) => setTimeout(r, 4000));
  const mesh = Number(await node(client, burster, [SERVER, String(MESH_PORT), String(BURST)]));
  tt.ok(own >= 1 && own <= 15, `the found firewall's own port answers ${own} of ${BURST} SYNs`);
  tt.ok(mesh >= 1 && mesh <= 15, `the mesh port answers ${mesh} of ${BURST}: the same limit (without it: all ${BURST})`);
  await driver.ensure([], []);
}

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  for (const backend of ['legacy', 'nft'] as const) {
    for (const name of ['syn-flood-hashlimit.rules.v4', 'syn-flood-limit.rules.v4']) {
      t.test(`${name} on iptables-${backend}: a SYN burst meets the same limit on the mesh port`, (tt) => check(tt, backend, name));
    }
  }
  t.test("fw4-syn-flood.nft on nftables: OpenWrt's syn_flood limit holds for the mesh port", (tt) => check(tt, null, 'fw4-syn-flood.nft'));
}

/**
 * An ipset blocklist in front of the found firewall (issue 32): `-m set --match-set blacklist src
 * -j DROP` is read as the set's members (`ipset save`), as the nft plugin reads named sets, so the
 * opening goes below the ban and is reported created — not unverified — while the banned address
 * stays refused on the mesh's port. Real ipsets and iptables in the corpus's namespaces.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { FirewallDriver, Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { verifyOpenings } from '@meshp/core/reconcile';
import { IptablesPlugin, nsenterRunner } from '@meshp/firewall-iptables';
import { corpusBed, fixture, MESH_PORT, PRIVATE } from '../helpers/corpus.js';
import { tool, type Backend } from '../helpers/ipt-lab.js';
import { labAvailable } from '../helpers/netns.js';

async function check(tt: Test, backend: Backend): Promise<void> {
  const b = await corpusBed(tt, backend);
  const f = fixture('ipset-blacklist.rules.v4');
  tt.comment(f.source);
  const set = /^# ipset: (.+)$/m.exec(f.text)![1]!.split('|').join('\n') + '\n';
  await b.server.exec('ipset', ['restore'], set);
  await b.server.exec(tool(backend, 4, 'restore'), [], f.text);
  await b.serve(22);
  const root = await mkdtemp(join(tmpdir(), 'ips-root-'));
  tt.teardown(() => rm(root, { recursive: true, force: true }));
  const plugin = new IptablesPlugin({ runner: nsenterRunner(b.server.path), backends: [backend], privateRange: PRIVATE });
  const driver = (await new Host({ root, firewall: 'auto' }).use(plugin).firewall()) as FirewallDriver;
  const web: Opening = { id: 'web/incoming/tcp/7443', module: 'web', port: MESH_PORT, protocol: 'tcp', from: [PRIVATE], path: 'incoming', action: 'accept' };
  tt.notOk(await b.from.client.reach('10.80.1.1', MESH_PORT), 'closed before the opening');
  tt.same((await driver.ensure([web], [])).refused ?? [], [], 'placed');
  tt.same([...(await verifyOpenings(driver, [web])).values()], [], 'the walk reads the set: created, not unverified');
  const input = (await b.server.exec(tool(backend, 4, 'save'), ['-t', 'filter'])).stdout.split('\n').filter((l) => l.startsWith('-A INPUT'));
  tt.ok(
    input.findIndex((l) => l.includes('--match-set blacklist')) < input.findIndex((l) => l.includes('meshp:')),
    `the accept below the ban:\n${input.join('\n')}`,
  );
  const [fromPrivate, fromBanned, fromOutside] = await Promise.all([
    b.from.client.reach('10.80.1.1', MESH_PORT),
    b.from.banned.reach('10.80.3.1', MESH_PORT),
    b.from.outside.reach('10.81.2.1', MESH_PORT),
  ]);
  tt.ok(fromPrivate, 'reachable from the private range');
  tt.notOk(fromBanned, 'the address in the set still refused on the mesh port');
  tt.notOk(fromOutside, 'not from outside');
  await driver.ensure([], []);
  // The rules go before the set: a set in use cannot be destroyed.
  await b.server.exec(tool(backend, 4, 'restore'), [], '*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\nCOMMIT\n');
  await b.server.exec('ipset', ['destroy', 'blacklist']);
}

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  for (const backend of ['legacy', 'nft'] as const) t.test(`ipset-blacklist.rules.v4 on iptables-${backend}`, (tt) => check(tt, backend));
}

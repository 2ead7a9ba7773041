/**
 * Per-interface dispatch (issue 32): a Docker host's `-A INPUT -i ens3 -j FILTERS`, FILTERS
 * accepting established and ssh, then dropping. `-i ens3` is read as the sources whose route back
 * leaves by ens3, so an opening from a range that arrives there goes above the jump and the port
 * opens; a range that arrives on ens3 and elsewhere is refused, naming the jump; and an opening
 * the driver wrote nothing for is never reported `unverified` (which means written, not proven).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t, { type Test } from 'tap';
import type { FirewallDriver, Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { verifyOpenings } from '@meshp/core/reconcile';
import { IptablesPlugin, nsenterRunner } from '@meshp/firewall-iptables';
import { fixture } from '../helpers/corpus.js';
import { httpd, reach, reaper, tool, type Backend } from '../helpers/ipt-lab.js';
import { labAvailable, netns, runPrefix, wire, type Netns } from '../helpers/netns.js';

const SERVER = '10.80.1.1';
const PORT = 7443;
const opening = (from: string[]): Opening => ({
  id: 'web/incoming/tcp/7443',
  module: 'web',
  port: PORT,
  protocol: 'tcp',
  from,
  path: 'incoming',
  action: 'accept',
});

/** The gateway: its uplink named ens3 with the default route out of it, and a docker0 bridge with Docker's network. */
async function gateway(
  tt: Test,
  backend: Backend,
): Promise<{ server: Netns; client: Netns; driver: FirewallDriver; load(text: string): Promise<void>; save(): Promise<string> }> {
  const p = runPrefix('if');
  const server = await netns(tt, `${p}s`);
  const client = await netns(tt, `${p}c`);
  await wire(server, `${SERVER}/24`, client, '10.80.1.2/24', `${p}1`);
  for (const args of [
    ['link', 'set', `${p}1a`, 'down'],
    ['link', 'set', `${p}1a`, 'name', 'ens3'],
    ['link', 'set', 'ens3', 'up'],
    ['route', 'add', 'default', 'via', '10.80.1.2', 'dev', 'ens3'],
    ['link', 'add', 'docker0', 'type', 'bridge'],
    ['addr', 'add', '172.17.0.1/16', 'dev', 'docker0'],
    ['link', 'set', 'docker0', 'up'],
  ])
    await server.exec('ip', args);
  await client.exec('ip', ['route', 'add', 'default', 'via', SERVER]);
  const www = await mkdtemp(join(tmpdir(), `${p}-www-`));
  tt.teardown(() => rm(www, { recursive: true, force: true }));
  reaper(tt).push(await httpd(server, PORT, www), await httpd(server, 22, www));
  const root = await mkdtemp(join(tmpdir(), `${p}-root-`));
  tt.teardown(() => rm(root, { recursive: true, force: true }));
  const load = async (text: string) => void (await server.exec(tool(backend, 4, 'restore'), [], text));
  const save = async () => (await server.exec(tool(backend, 4, 'save'), ['-t', 'filter'])).stdout.replace(/^#.*\n/gm, '').replace(/ \[\d+:\d+\]$/gm, '');
  await load(fixture('docker-filters.rules.v4').text);
  const plugin = new IptablesPlugin({ runner: nsenterRunner(server.path), backends: [backend], privateRange: '10.80.0.0/16' });
  const driver = (await new Host({ root, firewall: 'auto' }).use(plugin).firewall()) as FirewallDriver;
  return { server, client, driver, load, save };
}

async function check(tt: Test, backend: Backend): Promise<void> {
  const { client, driver, load, save } = await gateway(tt, backend);
  const f = fixture('docker-filters.rules.v4');
  tt.comment(f.source);
  tt.ok(await reach(client, SERVER, 22), "the found firewall's own ssh is open from the uplink");
  tt.notOk(await reach(client, SERVER, PORT), 'the mesh port is closed before the opening');

  const web = opening(['10.80.0.0/16']);
  tt.same((await driver.ensure([web], [])).refused ?? [], [], 'placed: 10.80.0.0/16 arrives on ens3 (the default route)');
  const input = (await save()).split('\n').filter((l) => l.startsWith('-A INPUT'));
  const jump = input.findIndex((l) => l.includes('-i ens3 -j FILTERS'));
  const accept = input.findIndex((l) => l.includes('meshp:web/incoming/tcp/7443'));
  tt.ok(accept >= 0 && accept < jump, `written above the ens3 dispatch:\n${input.join('\n')}`);
  tt.same([...(await verifyOpenings(driver, [web])).values()], [], 'the walk sees it open from the whole range: created, not unverified');
  tt.ok(await reach(client, SERVER, PORT), 'and the port is open from the uplink');

  await load(f.text);
  tt.notOk(await reach(client, SERVER, PORT), "the found firewall's reload loses it");
  await driver.ensure([web], []);
  tt.ok(await reach(client, SERVER, PORT), 'back after one ensure');
  await driver.ensure([], []);

  // Everywhere arrives on ens3 and on docker0: the dispatch treats them apart, one accept cannot honour both.
  const before = await save();
  const all = opening([]);
  const split = await driver.ensure([all], []);
  tt.match(
    split.refused,
    [{ id: all.id, reason: /^MESHP_OPENING_UNPLACEABLE: .*-i ens3 -j FILTERS.*arrives partly on the interface/ }],
    'a range on two interfaces: refused, naming the jump',
  );
  tt.equal(await save(), before, 'nothing written');

  // A dispatch on an interface no route leaves by cannot be read: nothing is written, and that is
  // said as refused (unverified would claim a rule that is not there).
  await load(f.text.replace(/-i ens3 -j FILTERS/g, '-i wan9 -j FILTERS'));
  const unread = await save();
  await driver.ensure([web], []);
  tt.equal(await save(), unread, 'nothing written behind the unreadable dispatch');
  const verdict = (await verifyOpenings(driver, [web])).get(web.id);
  tt.equal(verdict?.state, 'refused', 'not written: refused, not unverified');
  tt.match(
    verdict?.reason,
    /^MESHP_OPENING_UNPLACEABLE: opening web\/incoming\/tcp\/7443 is not written: .*-i wan9 -j FILTERS/,
    `with its reason: ${verdict?.reason}`,
  );
}

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  for (const backend of ['legacy', 'nft'] as const) {
    t.test(`docker-filters.rules.v4 on iptables-${backend}: the opening inside the ens3 dispatch, or refused with the reason`, (tt) => check(tt, backend));
  }
}

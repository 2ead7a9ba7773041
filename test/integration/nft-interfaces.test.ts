/**
 * OpenWrt fw4's per-zone dispatch on real nft (issue 32): `iifname "pppoe-wan" jump input_wan`,
 * the wan zone ending in `jump handle_reject`. `iifname` is read as the sources whose route back
 * leaves by the interface, so an opening from a range that arrives on pppoe-wan goes above the
 * wan dispatch (where wan traffic meets it) and the port opens; before, the accept landed above
 * the final `jump handle_reject`, which wan traffic never reaches. A range arriving on both zones
 * is refused, naming the dispatch.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import type { FirewallDriver, Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { verifyOpenings } from '@meshp/core/reconcile';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { fixture } from '../helpers/corpus.js';
import { httpd, reach, reaper } from '../helpers/ipt-lab.js';
import { labAvailable, netns, runPrefix, wire } from '../helpers/netns.js';

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

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('fw4-zones.nft: the opening where wan traffic meets it, or refused with the reason', async (tt) => {
    const p = runPrefix('nz');
    const server = await netns(tt, `${p}s`);
    const client = await netns(tt, `${p}c`);
    await wire(server, `${SERVER}/24`, client, '10.80.1.2/24', `${p}1`);
    // The router: its uplink pppoe-wan with the default route out of it, and the br-lan bridge.
    for (const args of [
      ['link', 'set', `${p}1a`, 'down'],
      ['link', 'set', `${p}1a`, 'name', 'pppoe-wan'],
      ['link', 'set', 'pppoe-wan', 'up'],
      ['route', 'add', 'default', 'via', '10.80.1.2', 'dev', 'pppoe-wan'],
      ['link', 'add', 'br-lan', 'type', 'bridge'],
      ['addr', 'add', '192.168.1.1/24', 'dev', 'br-lan'],
      ['link', 'set', 'br-lan', 'up'],
    ])
      await server.exec('ip', args);
    await client.exec('ip', ['route', 'add', 'default', 'via', SERVER]);
    const www = await mkdtemp(join(tmpdir(), `${p}-www-`));
    tt.teardown(() => rm(www, { recursive: true, force: true }));
    reaper(tt).push(await httpd(server, PORT, www), await httpd(server, 22, www));
    const f = fixture('fw4-zones.nft');
    tt.comment(f.source);
    await server.exec('nft', ['-f', '-'], f.text);
    const list = async () => (await server.exec('nft', ['list', 'chain', 'inet', 'fw4', 'input'])).stdout.split('\n').map((l) => l.trim());
    const root = await mkdtemp(join(tmpdir(), `${p}-root-`));
    tt.teardown(() => rm(root, { recursive: true, force: true }));
    const driver = (await new Host({ root, firewall: 'auto' })
      .use(new NftablesPlugin({ netns: server.name, privateRange: '10.80.0.0/16' }))
      .firewall()) as FirewallDriver;

    tt.ok(await reach(client, SERVER, 22), "the wan zone's own ssh rule is open from the uplink");
    tt.notOk(await reach(client, SERVER, PORT), 'the mesh port is closed before the opening');
    const web = opening(['10.80.0.0/16']);
    tt.same((await driver.ensure([web], [])).refused ?? [], [], 'placed: 10.80.0.0/16 arrives on pppoe-wan');
    const input = await list();
    const wan = input.findIndex((l) => l.startsWith('iifname "pppoe-wan" jump input_wan'));
    const accept = input.findIndex((l) => l.includes('meshp:web/incoming/tcp/7443'));
    tt.ok(accept >= 0 && accept < wan, `above the wan dispatch:\n${input.join('\n')}`);
    const verdicts = [...(await verifyOpenings(driver, [web])).values()];
    tt.notOk(
      verdicts.some((v) => v.state === 'refused'),
      `the walk sees it open from the whole range (the syn_flood limit aside): ${JSON.stringify(verdicts)}`,
    );
    tt.ok(await reach(client, SERVER, PORT), 'and the port is open from the uplink');
    await driver.ensure([], []);

    const before = await list();
    const all = opening([]);
    const split = await driver.ensure([all], []);
    tt.match(
      split.refused,
      [
        {
          id: all.id,
          reason: /^MESHP_OPENING_UNPLACEABLE: .*br-lan.*arrives partly on the interface|^MESHP_OPENING_UNPLACEABLE: .*arrives partly on the interface/,
        },
      ],
      'everywhere arrives on both zones: refused, naming the dispatch',
    );
    tt.same(await list(), before, 'nothing written');
  });
}

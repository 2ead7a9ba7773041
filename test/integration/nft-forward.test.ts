import t, { type Test } from 'tap';
import type { Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { NftablesPlugin, type NftablesDriver } from '@meshp/firewall-nftables';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, DOCKER_NAT, PUBLISHED, SERVER_CLIENT, SERVER_OUTSIDE, lab, onlyReceipt, reachable, splitLines } from '../helpers/nft-lab.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const published = (from: string[]): Opening => ({
    id: 'web/forwarded/tcp/18080',
    module: 'web',
    port: PUBLISHED,
    protocol: 'tcp',
    from,
    path: 'forwarded',
    action: 'accept',
  });
  const refusal: Opening = { id: 'store/forwarded/tcp/18080', module: 'store', port: PUBLISHED, protocol: 'tcp', from: [], path: 'forwarded', action: 'drop' };

  async function bed(t: Test) {
    const l = await lab(t, { app: true });
    await l.load(DOCKER_NAT);
    await l.serve(l.app, 80);
    const host = new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name, privateRange: CLIENT_NET }));
    const driver = (await host.firewall()) as NftablesDriver;
    return { l, driver };
  }

  t.test('a forwarded opening matches the original port of a DNATed (published) port', async (t) => {
    const { l, driver } = await bed(t);
    t.notOk(await reachable(l.client, SERVER_CLIENT, PUBLISHED), 'their forward chain drops it');
    const before = await splitLines(l);
    await driver.ensure([published([CLIENT_NET])], []);
    t.ok(await reachable(l.client, SERVER_CLIENT, PUBLISHED), 'reachable from the private range');
    t.notOk(await reachable(l.outside, SERVER_OUTSIDE, PUBLISHED), 'not from outside');
    const after = await splitLines(l);
    t.same(
      before.theirs.filter((x) => !after.theirs.includes(x)),
      [],
      'their rules and the NAT table untouched',
    );
    const added = after.theirs.filter((x) => !before.theirs.includes(x));
    t.equal(added.length, 1);
    t.match(added[0], /"chain":"forward","comment":"meshp:web\/forwarded\/tcp\/18080".*"proto-dst"/);
    t.ok(onlyReceipt(after.mesh), 'and the receipt in the mesh table');
  });

  t.test('a refusal in the mesh table drops a published port from outside the private range, whatever else accepts it', async (t) => {
    const { l, driver } = await bed(t);
    await driver.ensure([published([])], []);
    t.ok(await reachable(l.outside, SERVER_OUTSIDE, PUBLISHED), 'opened to anywhere, outside reaches it');
    const r = await driver.ensure([published([])], [refusal]);
    t.same(r, { added: [refusal.id], removed: [] });
    t.notOk(await reachable(l.outside, SERVER_OUTSIDE, PUBLISHED), 'the refusal wins from outside');
    t.ok(await reachable(l.client, SERVER_CLIENT, PUBLISHED), 'the private range still reaches it');
    t.match(
      await l.nft(['list', 'table', 'inet', 'meshp']),
      /ct original ip saddr != 10\.70\.1\.0\/24 .*ct original proto-dst 18080 drop comment "meshp:store\/forwarded\/tcp\/18080"/,
    );
    t.same(
      (await driver.openings()).find((o) => o.id === refusal.id),
      refusal,
      'the refusal reads back as it was asked',
    );
    t.same(await driver.ensure([published([])], []), { added: [], removed: [refusal.id] });
    t.ok(onlyReceipt((await splitLines(l)).mesh), "the mesh table's chains go with its last refusal; the receipt stays while openings do");
    t.ok(await reachable(l.outside, SERVER_OUTSIDE, PUBLISHED));
    t.same(await driver.ensure([], []), { added: [], removed: [published([]).id] });
    t.notMatch(await l.nft(['list', 'tables']), /inet meshp/, 'the mesh table goes with the last opening');
    t.notOk(await reachable(l.outside, SERVER_OUTSIDE, PUBLISHED), 'their forward chain drops it again');
  });
}

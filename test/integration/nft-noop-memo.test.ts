/**
 * The no-op ensure answered from the last one's memo (issue 31; plugins/firewall-nftables
 * noop-memo.ts), against a real nftables firewall in a namespace made here: a ruleset that only
 * counted packets meanwhile is the same ruleset (answered at once, one read); a marked rule
 * deleted by hand, a reload of the found firewall, another set of openings and a route that moved
 * under a rule that names an interface are not (planned again, and repaired).
 */
import t from 'tap';
import type { Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { NftablesPlugin, type NftablesDriver } from '@meshp/firewall-nftables';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, lab, reachable } from '../helpers/nft-lab.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const web: Opening = { id: 'web/incoming/tcp/9000', module: 'web', port: 9000, protocol: 'tcp', from: [CLIENT_NET], path: 'incoming', action: 'accept' };
  const dns: Opening = { id: 'dns/incoming/tcp/9053', module: 'dns', port: 9053, protocol: 'tcp', from: [CLIENT_NET], path: 'incoming', action: 'accept' };

  t.test('a no-op ensure is answered at once only while the ruleset and the ask are what it read', async (t) => {
    const l = await lab(t);
    const driver = (await new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name })).firewall()) as NftablesDriver;
    await l.serve(l.server, 9000);
    await l.serve(l.server, 9053);
    t.same(await driver.ensure([web], []), { added: [web.id], removed: [] }, 'the opening added');
    t.same(await driver.ensure([web], []), { added: [], removed: [] }, 'then nothing to do (planned: kept as the memo)');
    t.equal(driver.noop.hits, 0, 'no answer from the memo yet');

    // Packets the found firewall rejects: its counter moves, nothing else does.
    const counted = async () => /counter packets (\d+)/.exec(await l.nft(['list', 'chain', 'inet', 'filter', 'input']))?.[1];
    const before = await counted();
    t.notOk(await reachable(l.client, SERVER_CLIENT, 9999), 'a closed port, rejected and counted');
    t.not(await counted(), before, `the found counter moved (${before} → ${await counted()})`);
    driver.nft.reads = 0;
    t.same(await driver.ensure([web], []), { added: [], removed: [] }, 'still nothing to do');
    t.equal(driver.noop.hits, 1, 'answered by the memo: a counter is not a change');
    t.equal(driver.nft.reads, 1, 'after one read of the ruleset');

    // Our rule deleted by hand: the text differs, the ensure plans and puts it back.
    const handle = /comment "meshp:web\/incoming\/tcp\/9000" # handle (\d+)/.exec(await l.nft(['-a', 'list', 'chain', 'inet', 'filter', 'input']))?.[1];
    t.ok(handle, `our rule's handle (${handle})`);
    await l.nft(['delete', 'rule', 'inet', 'filter', 'input', 'handle', handle!]);
    t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'closed once our rule is gone');
    t.same(await driver.ensure([web], []), { added: [web.id], removed: [] }, 'a rule deleted by hand is a change: added again');
    t.ok(await reachable(l.client, SERVER_CLIENT, 9000), 'open again');
    t.equal(driver.noop.hits, 1, 'not answered by the memo');

    // Another ask: planned.
    t.same(await driver.ensure([web, dns], []), { added: [dns.id], removed: [] }, 'another set of openings is planned');
    t.same(await driver.ensure([web, dns], []), { added: [], removed: [] });
    // The found firewall reloaded (flush ruleset, its file again): planned, both back.
    await l.reload();
    t.same((await driver.ensure([web, dns], [])).added.sort(), [dns.id, web.id], 'after a reload both are added again');
    t.equal(driver.noop.hits, 1, 'neither answered by the memo');

    // A found rule naming an interface: the routes are read beside the ruleset, and read again
    // at each no-op; a route that moved is a change of input.
    await l.load('add rule inet filter input iifname "mq0" tcp dport 7 accept\n');
    t.same(await driver.ensure([web, dns], []), { added: [], removed: [] }, 'an accept on an interface changes no placement');
    t.same(await driver.ensure([web, dns], []), { added: [], removed: [] });
    t.equal(driver.noop.hits, 2, 'the same routes: answered by the memo');
    await l.server.exec('ip', ['link', 'add', 'mq0', 'type', 'veth', 'peer', 'name', 'mq1']);
    for (const dev of ['mq0', 'mq1']) await l.server.exec('ip', ['link', 'set', dev, 'up']);
    await l.server.exec('ip', ['route', 'add', '198.51.100.0/24', 'dev', 'mq0']);
    t.same(await driver.ensure([web, dns], []), { added: [], removed: [] }, 'nothing to change');
    t.equal(driver.noop.hits, 2, 'but planned: the routes it read moved');
  });
}

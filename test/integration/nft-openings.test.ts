import t, { type Test } from 'tap';
import type { Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { NftablesPlugin, type NftablesDriver } from '@meshp/firewall-nftables';
import { labAvailable } from '../helpers/netns.js';
import {
  CLIENT_NET,
  CLIENT6_NET,
  SERVER6,
  SERVER_CLIENT,
  SERVER_OUTSIDE,
  lab,
  onlyReceipt,
  reachable,
  ruleLines,
  splitLines,
  type Lab,
} from '../helpers/nft-lab.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const web: Opening = {
    id: 'web/incoming/tcp/9000',
    module: 'web',
    port: 9000,
    protocol: 'tcp',
    from: [CLIENT_NET, CLIENT6_NET],
    path: 'incoming',
    action: 'accept',
  };
  const dns: Opening = { id: 'dns/incoming/tcp/9053', module: 'dns', port: 9053, protocol: 'tcp', from: [CLIENT_NET], path: 'incoming', action: 'accept' };

  async function adopted(t: Test): Promise<{ l: Lab; driver: NftablesDriver }> {
    const l = await lab(t);
    const plugin = new NftablesPlugin({ netns: l.server.name });
    const host = new Host({ root: l.root }).use(plugin);
    const driver = (await host.firewall()) as NftablesDriver;
    t.equal(driver.kind, 'nftables');
    await l.serve(l.server, 9000);
    await l.serve(l.server, 9053);
    await l.serve(l.server, 8080);
    return { l, driver };
  }

  t.test('an opening makes its port reachable from its range and from nowhere else', async (t) => {
    const { l, driver } = await adopted(t);
    t.ok(await reachable(l.client, SERVER_CLIENT, 8080), 'the found firewall lets 8080 through');
    t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'closed before the opening');
    const before = await splitLines(l);
    t.same(before.mesh, [], 'no mesh table before');

    const r = await driver.ensure([web], []);
    t.same(r, { added: [web.id], removed: [] });
    t.ok(await reachable(l.client, SERVER_CLIENT, 9000), 'reachable from the client range');
    t.ok(await reachable(l.client, SERVER6, 9000), 'and over IPv6');
    t.notOk(await reachable(l.outside, SERVER_OUTSIDE, 9000), 'not from the outside machine');

    const after = await splitLines(l);
    const added = after.theirs.filter((x) => !before.theirs.includes(x));
    const gone = before.theirs.filter((x) => !after.theirs.includes(x));
    t.same(gone, [], 'no rule of theirs changed');
    t.equal(added.length, 2, 'one IPv4 and one IPv6 rule');
    t.ok(
      added.every((x) => x.includes('"comment":"meshp:web/incoming/tcp/9000"')),
      'every added rule carries the mark',
    );
    t.ok(onlyReceipt(after.mesh), `beside them, only the mesh table with the batch's receipt: ${after.mesh.join(' | ')}`);

    t.same(await driver.openings(), [web], 'the marked rules read back as the opening');
  });

  t.test('our accepts sit just before their first drop, after their ct state invalid drop', async (t) => {
    const { l, driver } = await adopted(t);
    await driver.ensure([web], []);
    const text = await l.nft(['list', 'chain', 'inet', 'filter', 'input']);
    const lines = text
      .split('\n')
      .map((x) => x.trim())
      .filter((x) => x && !x.startsWith('type') && !x.startsWith('chain') && x !== '}');
    const first = lines.findIndex((x) => x.includes('meshp:'));
    t.ok(lines.indexOf('ct state invalid drop') < first, 'after ct state invalid drop');
    t.equal(lines[first + 2], 'counter packets 0 bytes 0 reject', 'just before their reject');
    t.equal(lines[first - 1], 'meta l4proto ipv6-icmp accept', 'right after the rule that was before the reject');
    t.match(lines[first], /^ip saddr .*meshp:/, 'in plan order: IPv4 first');
    t.match(lines[first + 1], /^ip6 saddr .*meshp:/);
  });

  t.test('a second ensure with the same input changes nothing and reads the ruleset once', async (t) => {
    const { l, driver } = await adopted(t);
    await driver.ensure([web, dns], []);
    const before = await ruleLines(l);
    driver.nft.reads = 0;
    t.same(await driver.ensure([web, dns], []), { added: [], removed: [] });
    t.equal(driver.nft.reads, 1);
    t.same(await ruleLines(l), before);
  });

  t.test('a reload of the found config loses our rules and the next ensure restores them', async (t) => {
    const { l, driver } = await adopted(t);
    await driver.ensure([web], []);
    await l.reload();
    t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'the reload closed it');
    t.same(await driver.openings(), []);
    t.same(await driver.ensure([web], []), { added: [web.id], removed: [] });
    t.ok(await reachable(l.client, SERVER_CLIENT, 9000), 'the next ensure opened it again');
  });

  t.test('removing an opening removes only its own rules', async (t) => {
    const { l, driver } = await adopted(t);
    await driver.ensure([web, dns], []);
    const before = await splitLines(l);
    t.same(await driver.ensure([web], []), { added: [], removed: [dns.id] });
    const after = await splitLines(l);
    t.same(
      before.theirs.filter((x) => !after.theirs.includes(x)).map((x) => /"comment":"([^"]+)"/.exec(x)?.[1]),
      ['meshp:dns/incoming/tcp/9053'],
    );
    t.same(
      after.theirs.filter((x) => !before.theirs.includes(x)),
      [],
    );
    t.ok(onlyReceipt(after.mesh), 'the removal has its receipt too');
    t.not(after.mesh[1], before.mesh[1], 'a new one');
    t.notOk(await reachable(l.client, SERVER_CLIENT, 9053), 'its port closed again');
    t.ok(await reachable(l.client, SERVER_CLIENT, 9000), 'the other one stays open');
  });

  t.test('an unmarked copy of our rule is never touched; a changed opening is replaced', async (t) => {
    const { l, driver } = await adopted(t);
    await driver.ensure([web], []);
    await l.nft(['insert', 'rule', 'inet', 'filter', 'input', 'tcp', 'dport', '9000', 'accept']);
    const narrowed = { ...web, from: ['10.70.1.2/32'] };
    t.same(await driver.ensure([narrowed], []), { added: [web.id], removed: [] });
    t.same(await driver.openings(), [narrowed]);
    const text = await l.nft(['list', 'chain', 'inet', 'filter', 'input']);
    t.match(text, /^\s*tcp dport 9000 accept$/m, 'their unmarked rule is still there');
  });
}

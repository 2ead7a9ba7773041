import t from 'tap';
import type { Opening } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { NftablesPlugin, type NftablesDriver } from '@meshp/firewall-nftables';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, SERVER_OUTSIDE, lab, reachable } from '../helpers/nft-lab.js';

/** A found firewall whose input chain accepts by policy and drops only in a chain it jumps to. */
const JUMPING = `flush ruleset
table inet filter {
\tchain guard {
\t\ttcp dport 8080 accept
\t\tcounter drop
\t}

\tchain input {
\t\ttype filter hook input priority filter; policy accept;
\t\tct state established,related accept
\t\tiif "lo" accept
\t\tmeta l4proto { icmp, ipv6-icmp } accept
\t\tjump guard
\t}
}
`;

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const web: Opening = { id: 'web/incoming/tcp/9000', module: 'web', port: 9000, protocol: 'tcp', from: [CLIENT_NET], path: 'incoming', action: 'accept' };

  t.test('a drop reached through a jump is seen: the opening goes just before the jump', async (t) => {
    const l = await lab(t);
    await l.load(JUMPING);
    const driver = (await new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name })).firewall()) as NftablesDriver;
    t.equal(driver.kind, 'nftables');
    await l.serve(l.server, 9000);
    await l.serve(l.server, 8080);
    t.ok(await reachable(l.client, SERVER_CLIENT, 8080), 'their chain lets 8080 through');
    t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'and drops 9000');

    t.same(await driver.ensure([web], []), { added: [web.id], removed: [] });
    t.ok(await reachable(l.client, SERVER_CLIENT, 9000), 'open from the client range');
    t.notOk(await reachable(l.outside, SERVER_OUTSIDE, 9000), 'still dropped from outside, by their chain');

    const lines = (await l.nft(['list', 'chain', 'inet', 'filter', 'input'])).split('\n').map((x) => x.trim());
    const ours = lines.findIndex((x) => x.includes('meshp:web/incoming/tcp/9000'));
    t.equal(lines[ours + 1], 'jump guard', 'just before the jump');
    t.ok(
      lines.slice(0, ours).some((x) => x.startsWith('iif "lo"')),
      'after their own accepts',
    );
    t.equal((await l.nft(['list', 'chain', 'inet', 'filter', 'guard'])).includes('meshp'), false, 'nothing written into their jumped-to chain');

    driver.nft.reads = 0;
    t.same(await driver.ensure([web], []), { added: [], removed: [] }, 'the next ensure finds it in place');
    t.equal(driver.nft.reads, 1);
  });
}

import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import t from 'tap';
import { Host } from '@meshp/core/host';
import { NftablesPlugin, type NftablesDriver, type NftablesRetired } from '@meshp/firewall-nftables';
import { labAvailable } from '../helpers/netns.js';
import { FOUND_CONFIG, lab, ruleLines } from '../helpers/nft-lab.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('a config that includes its tables is read under the host root: retire and reenable find them', async (t) => {
    const l = await lab(t);
    // The same firewall, split the way Debian setups often are: the tables live in /etc/nftables.d.
    const tables = FOUND_CONFIG.slice(FOUND_CONFIG.indexOf('table inet filter'));
    await mkdir(join(l.root, 'etc/nftables.d'), { recursive: true });
    await writeFile(join(l.root, 'etc/nftables.d/10-filter.nft'), tables);
    await writeFile(l.configFile, '#!/usr/sbin/nft -f\nflush ruleset\ninclude "/etc/nftables.d/*.nft"\n');
    const config = await readFile(l.configFile);
    const driver = (await new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name })).firewall()) as NftablesDriver;
    const start = await ruleLines(l);

    const state = (await driver.retire()) as NftablesRetired;
    t.same(state.tables, ['inet filter'], "the included table is known as the config's");
    t.notOk(
      (await ruleLines(l)).some((x) => x.includes('"name":"filter"')),
      'and retired',
    );
    await driver.reenable(state);
    t.same(await ruleLines(l), start, 'reenable loads it back from the included file');
    t.same(await readFile(l.configFile), config, 'the config is not written');
  });
}

/**
 * The firewall kit (@meshp/testkit) run as a plugin author runs it: against the nftables kind, and
 * against the template an author starts from (plugins/testkit/template), which must pass as shipped.
 */
import t from 'tap';
import { ADDRESSES, firewallConformance } from '@meshp/testkit';
import { labAvailable } from '../helpers/netns.js';
import { NftablesPlugin, nftSpec } from '../helpers/testkit-beds.js';
import MyKindPlugin from '../../plugins/testkit/template/firewall-kind.mjs';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('nftables', async (t) => {
    firewallConformance(
      t,
      nftSpec('nftables', 'etc/nftables.conf', (l) => new NftablesPlugin({ netns: l.server.name, privateRange: ADDRESSES.privateRange })),
    );
  });
  t.test('the template (plugins/testkit/template/firewall-kind.mjs)', async (t) => {
    firewallConformance(
      t,
      nftSpec('mykind', 'etc/mykind.conf', (l) => new MyKindPlugin({ netns: l.server.name, privateRange: ADDRESSES.privateRange })),
    );
  });
}

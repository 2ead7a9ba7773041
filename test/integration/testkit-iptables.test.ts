/** The firewall kit (@meshp/testkit) against the iptables kinds, on both backends. */
import t from 'tap';
import { firewallConformance } from '@meshp/testkit';
import { labAvailable } from '../helpers/netns.js';
import { iptSpec } from '../helpers/testkit-beds.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  for (const backend of ['legacy', 'nft'] as const) {
    t.test(`iptables-${backend}`, async (t) => {
      firewallConformance(t, iptSpec(backend));
    });
  }
}

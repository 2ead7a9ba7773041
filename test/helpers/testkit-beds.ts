/**
 * Found firewalls and rule readers for the kit's own runs (test/integration/testkit-*.test.ts):
 * each kind loads a found firewall the way its service does and hands the kit a plugin.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { IptablesPlugin, nsenterRunner } from '@meshp/firewall-iptables';
import { ADDRESSES, FOUND_PORT, type FirewallKitSpec, type KitLab } from '@meshp/testkit';
import type { Plugin } from '@meshp/core';
// iptables' found firewall is the ipt lab's: it allows 8080 (the kit's FOUND_PORT) and denies the rest.
import { RULES_V4, RULES_V6 } from './ipt-lab.js';

export const NFT_CONFIG = `#!/usr/sbin/nft -f
flush ruleset

table inet filter {
\tchain input {
\t\ttype filter hook input priority filter; policy drop;
\t\tct state established,related accept
\t\tct state invalid drop
\t\tiif "lo" accept
\t\ttcp dport ${FOUND_PORT} accept
\t\tcounter reject
\t}
\tchain forward {
\t\ttype filter hook forward priority filter; policy drop;
\t}
}
`;

/** The ruleset's objects as lines, handles and counters left out, the mesh's own left out. */
export async function nftFound(l: KitLab): Promise<string[]> {
  const doc = JSON.parse((await l.server.exec('nft', ['-j', 'list', 'ruleset'])).stdout) as { nftables: Record<string, Record<string, unknown>>[] };
  return doc.nftables
    .map((item) => Object.entries(item)[0]!)
    .filter(([kind, body]) => kind !== 'metainfo' && !String(body.table ?? body.name).startsWith('meshp') && !JSON.stringify(body).includes('meshp:'))
    .map(([kind, { handle: _h, ...rest }]) => `${kind} ${JSON.stringify(rest).replace(/"counter":\{[^}]*\}/g, '"counter":{}')}`);
}

/** An nftables-spoken kind whose found firewall loads from CONFIG under the root. */
export function nftSpec(kind: string, config: string, plugin: (l: KitLab) => Plugin): FirewallKitSpec {
  return {
    kind,
    async setup(l) {
      const file = join(l.root, config);
      await writeFile(file, NFT_CONFIG);
      const reload = async () => void (await l.server.exec('nft', ['-f', file]));
      await reload();
      return { plugin: plugin(l), reload, foundRules: () => nftFound(l) };
    },
  };
}

/** iptables on one backend, loaded from rules.v4 and rules.v6 as netfilter-persistent does. */
export function iptSpec(backend: 'legacy' | 'nft'): FirewallKitSpec {
  return {
    kind: backend === 'legacy' ? 'iptables-legacy' : 'iptables-nft',
    async setup(l) {
      await mkdir(join(l.root, 'etc/iptables'), { recursive: true });
      const config = join(l.root, 'etc/iptables/rules.v4');
      const config6 = join(l.root, 'etc/iptables/rules.v6');
      await writeFile(config, RULES_V4);
      await writeFile(config6, RULES_V6);
      const reload = async () => {
        await l.server.exec(`iptables-${backend}-restore`, [config]);
        await l.server.exec(`ip6tables-${backend}-restore`, [config6]);
      };
      await reload();
      const foundRules = async () =>
        [
          (await l.server.exec(`iptables-${backend}-save`, ['-t', 'filter'])).stdout,
          (await l.server.exec(`ip6tables-${backend}-save`, ['-t', 'filter'])).stdout,
        ]
          .join('\n')
          .split('\n')
          .filter((x) => x && !x.startsWith('#') && !x.includes('meshp:'))
          .map((x) => x.replace(/\[\d+:\d+\]/, ''));
      return {
        plugin: new IptablesPlugin({ runner: nsenterRunner(l.server.path), backends: [backend], privateRange: ADDRESSES.privateRange }),
        reload,
        foundRules,
      };
    },
  };
}

export { NftablesPlugin };

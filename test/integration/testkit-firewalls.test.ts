/**
 * The firewall kit (@meshp/testkit) run as a plugin author runs it, against the project's own kinds:
 * nftables, and iptables on both of its backends. Each kind's `setup` loads a found firewall the way
 * its service does and hands the kit a plugin speaking to the lab's server namespace.
 */
import t from 'tap';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { NftablesPlugin } from '@meshp/firewall-nftables';
import { IptablesPlugin, nsenterRunner } from '@meshp/firewall-iptables';
import { ADDRESSES, FOUND_PORT, firewallConformance, type KitLab } from '@meshp/testkit';
import { labAvailable } from '../helpers/netns.js';

const NFT_CONFIG = `#!/usr/sbin/nft -f
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

const RULES_V4 = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp --dport ${FOUND_PORT} -j ACCEPT
-A INPUT -p tcp -j REJECT --reject-with tcp-reset
COMMIT
`;

const RULES_V6 = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p tcp --dport ${FOUND_PORT} -j ACCEPT
COMMIT
`;

/** The ruleset's objects as lines, handles and counters left out, the mesh's own left out. */
async function nftFound(l: KitLab): Promise<string[]> {
  const doc = JSON.parse((await l.server.exec('nft', ['-j', 'list', 'ruleset'])).stdout) as { nftables: Record<string, Record<string, unknown>>[] };
  return doc.nftables
    .map((item) => Object.entries(item)[0]!)
    .filter(([kind, body]) => kind !== 'metainfo' && !String(body.table ?? body.name).startsWith('meshp') && !JSON.stringify(body).includes('meshp:'))
    .map(([kind, { handle: _h, ...rest }]) => `${kind} ${JSON.stringify(rest).replace(/"counter":\{[^}]*\}/g, '"counter":{}')}`);
}

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('nftables', async (t) => {
    firewallConformance(t, {
      kind: 'nftables',
      async setup(l) {
        const config = join(l.root, 'etc/nftables.conf');
        await writeFile(config, NFT_CONFIG);
        const reload = async () => void (await l.server.exec('nft', ['-f', config]));
        await reload();
        return { plugin: new NftablesPlugin({ netns: l.server.name, privateRange: ADDRESSES.privateRange }), reload, foundRules: () => nftFound(l) };
      },
    });
  });

  for (const backend of ['legacy', 'nft'] as const) {
    t.test(`iptables-${backend}`, async (t) => {
      firewallConformance(t, {
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
          const save = async () =>
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
            foundRules: save,
          };
        },
      });
    });
  }
}

import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type DnsArgs = GlobalArgs & { network: string; credential?: string };

const get: CommandModule<GlobalArgs, DnsArgs> = {
  command: 'get',
  describe: "the network's DNS: its domain, nameservers, split domains, search domains, extra records and foundation names",
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { dnsGet } = await import('../remote/dns.js');
    await dnsGet(a);
  },
};

const set: CommandModule<GlobalArgs, DnsArgs & ChangeArgs & { file: string }> = {
  command: 'set <file>',
  describe:
    'replace the DNS from a JSON file: { "domain", "nameservers", "searchDomains", "split": [ { "domain", "nameservers" } ], "records": [ { "name", "type": A|AAAA|CNAME, "value" } ] }',
  builder: (y) => changeOptions(remoteOptions(y)).positional('file', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { dnsSet } = await import('../remote/dns.js');
    await dnsSet(a);
  },
};

export const dnsCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'dns <command>',
  describe: "the network's names: <node>.<domain> for the peers each node may see, extra records, nameservers",
  builder: (y) => y.command(get).command(set).demandCommand(1),
  handler: () => undefined,
};

/** `meshp dns get | set FILE` (issue 25): one Admin call each, a table or one JSON document. */
import type { Dns, DnsRecord } from '@meshp/core';
import { dnsToFile, readDnsFile } from '@meshp/core/schema';
import { confirmChange, say, table, type Change, type Out } from '../output.js';
import { withAdmin, type RemoteArgs } from './admin.js';
import { readJson } from './ops.js';

const recordRows = (records: readonly DnsRecord[], domain: string, source: string): string[][] =>
  records.flatMap((r) => [
    ...(r.cname ? [[`${r.name}.${domain}`, 'CNAME', r.cname, source]] : []),
    ...r.addresses.map((a) => [`${r.name}.${domain}`, a.includes(':') ? 'AAAA' : 'A', a, source]),
  ]);

function dnsText(dns: Dns, domain: string, foundation: readonly DnsRecord[]): string {
  const lines = [
    `domain: ${domain}${dns.domain ? '' : ' (the default: <network>.mesh)'}`,
    `nodes: <node>.${domain}, each node answering the names of the peers its policy lets it see`,
    `nameservers: ${dns.nameservers.join(', ') || "(none: the machine's own resolvers)"}`,
    `search domains: ${dns.searchDomains.join(', ') || '(none)'}`,
    ...dns.splits.map((s) => `split: ${s.domain} -> ${s.nameservers.join(', ')}`),
  ];
  const rows = [...recordRows(dns.records, domain, 'extra'), ...recordRows(foundation, domain, 'foundation')];
  return rows.length ? `${lines.join('\n')}\n${table(['NAME', 'TYPE', 'VALUE', 'SOURCE'], rows)}` : `${lines.join('\n')}\nrecords: (none)`;
}

export async function dnsGet(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('getDns', { network }));
  const dns = r.dns ?? { nameservers: [], searchDomains: [], records: [], domain: '', splits: [] };
  const foundation = r.foundation.map((f) => ({ name: f.name, addresses: f.addresses }));
  say(a, { ...dnsToFile(dns), domainInForce: r.domain, foundation }, dnsText(dns, r.domain, r.foundation));
}

/** The nodes whose answers change, as one line. */
const whoChanges = (nodes: readonly string[]): string =>
  nodes.length ? `answers change on ${nodes.length} node(s): ${nodes.join(', ')}` : 'no node answers differently';

export async function dnsSet(a: RemoteArgs & Out & Change & { file: string }): Promise<void> {
  // Checked here by the one schema before anything is sent: a record of type "MX" or a nameserver "dns.google" is refused, naming the field.
  const dns = readDnsFile(readJson(a.file));
  const preview = await withAdmin(a, (c, network) => c.call('setDns', { network, dns, preview: true }));
  if (a.preview) {
    return say(
      a,
      { preview: true, changedNodes: preview.changedNodes, dns: dnsToFile(dns) },
      `would replace the DNS of ${a.network ?? 'default'}: ${whoChanges(preview.changedNodes)}\n(preview: nothing changed)`,
    );
  }
  await confirmChange(
    a.yes,
    `Replace the DNS of ${a.network ?? 'default'}? ${whoChanges(preview.changedNodes)}`,
    'pass --yes to set it (or --preview to see what it does)',
  );
  const r = await withAdmin(a, (c, network) => c.call('setDns', { network, dns, preview: false }));
  say(a, { stateVersion: r.stateVersion, changedNodes: r.changedNodes }, `DNS set (state version ${r.stateVersion}): ${whoChanges(r.changedNodes)}`);
}

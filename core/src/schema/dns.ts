/**
 * `meshp dns set FILE` (issue 25): a network's DNS as the operator writes it, checked the same way by
 * the CLI (before sending) and the controller (before storing), and turned into the wire's `Dns`.
 *
 *   { "domain": "corp.mesh", "nameservers": ["10.0.0.53"], "searchDomains": ["corp.mesh"],
 *     "split": [ { "domain": "corp.example", "nameservers": ["10.1.0.53"] } ],
 *     "records": [ { "name": "www", "type": "A", "value": "100.96.0.9" }, { "name": "web", "type": "CNAME", "value": "www" } ] }
 */
import { z } from 'zod';
import type { Dns, DnsRecord } from '../contract/wire.js';
import { MeshpError } from '../errors.js';
import { addressFamily } from '../net/address.js';
import { checkInput } from './check.js';

const LABEL = '[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?';
/** A name of one label or more, lower case, no trailing dot: at most 253 characters. */
const DOMAIN = new RegExp(`^${LABEL}(\\.${LABEL})*$`);
const domain = z.string().max(253).regex(DOMAIN, 'must be a domain name: lower-case labels of letters, digits, _ and -, joined by dots (no trailing dot)');
/** A CNAME's target: a name of the mesh, or a full name with its trailing dot. */
const target = z
  .string()
  .max(254)
  .refine((v) => DOMAIN.test(v.endsWith('.') ? v.slice(0, -1) : v), 'must be a name of the mesh or a full name ending in "."');
const address = (family?: 4 | 6) =>
  z
    .string()
    .refine((v) => (family ? addressFamily(v) === family : addressFamily(v) !== null), family ? `must be an IPv${family} address` : 'must be an IP address');
/** A nameserver: an address, with a port where it is not 53 (`10.0.0.53:5353`, `[fd00::53]:5353`). */
const nameserver = z.string().refine((v) => parseNameserver(v) !== null, 'must be an IP address, or ADDRESS:PORT ([v6]:PORT)');

const record = z.discriminatedUnion('type', [
  z.strictObject({ name: domain, type: z.literal('A'), value: address(4) }),
  z.strictObject({ name: domain, type: z.literal('AAAA'), value: address(6) }),
  z.strictObject({ name: domain, type: z.literal('CNAME'), value: target }),
]);

export const dnsFileSchema = z.strictObject({
  $schema: z.string().optional(),
  domain: domain.optional(),
  nameservers: z.array(nameserver).max(16).optional(),
  searchDomains: z.array(domain).max(16).optional(),
  split: z
    .array(z.strictObject({ domain, nameservers: z.array(nameserver).min(1).max(16) }))
    .max(256)
    .optional(),
  records: z.array(record).max(10_000).optional(),
});

export type DnsFile = z.output<typeof dnsFileSchema>;

/** A nameserver's address and port, or null. */
export function parseNameserver(text: string): { address: string; port: number } | null {
  const m = /^\[([^\]]+)\]:(\d{1,5})$/.exec(text) ?? /^([^:]+):(\d{1,5})$/.exec(text);
  const [addr, port] = m ? [m[1]!, Number(m[2])] : [text, 53];
  if (addressFamily(addr) === null || port < 1 || port > 65535) return null;
  return { address: addr, port };
}

/** The records as the wire groups them: one per name, its addresses together, a CNAME alone. */
function wireRecords(records: DnsFile['records'] = []): DnsRecord[] {
  const by = new Map<string, DnsRecord>();
  for (const r of records) {
    const had = by.get(r.name);
    if (r.type === 'CNAME') {
      if (had) throw new MeshpError('MESHP_DNS_INVALID', `dns file: records: ${r.name} has a CNAME and another record (a CNAME stands alone)`);
      by.set(r.name, { name: r.name, addresses: [], cname: r.value });
      continue;
    }
    if (had?.cname) throw new MeshpError('MESHP_DNS_INVALID', `dns file: records: ${r.name} has a CNAME and another record (a CNAME stands alone)`);
    const rec = had ?? { name: r.name, addresses: [], cname: '' };
    if (!rec.addresses.includes(r.value)) rec.addresses.push(r.value);
    by.set(r.name, rec);
  }
  return [...by.values()].map((r) => ({ ...r, addresses: [...r.addresses].sort() })).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}

/** `dns set FILE`'s document, checked, as the wire's `Dns` (without the foundation names: the controller adds those). */
export function readDnsFile(doc: unknown): Dns {
  const d = checkInput(dnsFileSchema, doc, 'dns file', 'MESHP_DNS_INVALID');
  const splits = (d.split ?? []).map((s) => ({ domain: s.domain, nameservers: [...s.nameservers] }));
  const seen = new Set<string>();
  for (const s of splits) {
    if (seen.has(s.domain)) throw new MeshpError('MESHP_DNS_INVALID', `dns file: split: ${s.domain} is given twice`);
    seen.add(s.domain);
  }
  return {
    domain: d.domain ?? '',
    nameservers: [...(d.nameservers ?? [])],
    searchDomains: [...(d.searchDomains ?? [])],
    splits: splits.sort((a, b) => (a.domain < b.domain ? -1 : 1)),
    records: wireRecords(d.records),
  };
}

/** The wire's `Dns` back as the file's document (`dns get --json` prints what `dns set` reads). */
export function dnsToFile(d: Dns): DnsFile {
  const records: NonNullable<DnsFile['records']> = [];
  for (const r of d.records) {
    if (r.cname) records.push({ name: r.name, type: 'CNAME', value: r.cname });
    for (const a of r.addresses) records.push(addressFamily(a) === 6 ? { name: r.name, type: 'AAAA', value: a } : { name: r.name, type: 'A', value: a });
  }
  return {
    ...(d.domain ? { domain: d.domain } : {}),
    nameservers: [...d.nameservers],
    searchDomains: [...d.searchDomains],
    split: d.splits.map((s) => ({ domain: s.domain, nameservers: [...s.nameservers] })),
    records,
  };
}

/** A `Dns` that came over the wire (the admin call), checked as the file would be. */
export function checkDns(d: Dns): Dns {
  return readDnsFile(dnsToFile(d));
}

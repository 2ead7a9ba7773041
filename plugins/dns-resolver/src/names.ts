/**
 * The names a node answers, from its view alone: `<peer>.<domain>` for each peer of the view (so a
 * peer the policy hides, or one removed, has no name here), the node's own name, and the DNS
 * component's records (extra records, foundation names). Built from the view, then patched by each
 * change of its peers alone (a join, a rename, a removal: the names it touches, whatever the view's
 * size); a change of a component the names come from (dns, tunnel, declaration) builds it again.
 */
import { addressFamily } from '@meshp/core/net';
import type { Components, Peer } from '@meshp/core';

export interface NameEntry {
  a: string[];
  aaaa: string[];
  /** A CNAME's target, as a full name without its trailing dot. */
  cname?: string;
}

export interface NameTable {
  /** The mesh's domain, lower case, without a trailing dot ('': no DNS component yet). */
  domain: string;
  names: Map<string, NameEntry>;
  /** The records' names alone: what a name is again once the peer that shadowed it goes. */
  records: Map<string, NameEntry>;
}

/** The components a table is built from: a change of one of them builds it again. */
export const NAMED_COMPONENTS: readonly string[] = ['dns', 'tunnel', 'declaration'];

const bare = (a: string): string => a.replace(/\/\d+$/, '');

function entryOf(addresses: readonly string[]): NameEntry {
  const e: NameEntry = { a: [], aaaa: [] };
  for (const raw of addresses) {
    const a = bare(raw);
    const f = addressFamily(a);
    if (f === 4) e.a.push(a);
    else if (f === 6) e.aaaa.push(a);
  }
  return e;
}

/** What a node's view names: the source is the view, nothing else. */
export interface NamedView {
  readonly network?: string;
  readonly peers: ReadonlyMap<string, { peer: Peer }>;
  readonly components: Components;
}

export function nameTable(view: NamedView): NameTable {
  const dns = view.components.dns;
  const domain = (dns?.domain || (view.network ? `${view.network}.mesh` : '')).toLowerCase().replace(/\.$/, '');
  const records = new Map<string, NameEntry>();
  if (!domain) return { domain, names: new Map(), records };
  const fq = (n: string) => `${n.toLowerCase()}.${domain}`;
  for (const r of dns?.records ?? []) {
    if (r.cname) records.set(fq(r.name), { a: [], aaaa: [], cname: r.cname.endsWith('.') ? r.cname.slice(0, -1).toLowerCase() : fq(r.cname) });
    else records.set(fq(r.name), entryOf(r.addresses));
  }
  const names = new Map(records);
  // The nodes' names after the records: a node's name is its own (the controller refuses a record named as a node).
  for (const { peer } of view.peers.values()) names.set(fq(peer.id), entryOf(peer.addresses));
  const self = view.components.declaration?.node;
  const address = view.components.tunnel?.address;
  if (self && address) names.set(fq(self), entryOf([address]));
  return { domain, names, records };
}

/**
 * The table after a change of these peers only (upserted, removed, unscoped: the view already holds
 * the outcome): each one's name as the view has it now, or gone — back to a record of that name, if
 * one was shadowed. In place; the same table `nameTable` would build from the view.
 */
export function patchTable(table: NameTable, view: NamedView, peers: Iterable<string>): void {
  if (!table.domain) return;
  const self = view.components.declaration?.node;
  for (const id of peers) {
    const name = `${id.toLowerCase()}.${table.domain}`;
    if (id === self) continue;
    const p = view.peers.get(id);
    if (p) table.names.set(name, entryOf(p.peer.addresses));
    else {
      const rec = table.records.get(name);
      if (rec) table.names.set(name, rec);
      else table.names.delete(name);
    }
  }
}

/** Whether `name` is the mesh's domain or under it. */
export function inDomain(table: NameTable, name: string): boolean {
  const n = name.toLowerCase().replace(/\.$/, '');
  return !!table.domain && (n === table.domain || n.endsWith(`.${table.domain}`));
}

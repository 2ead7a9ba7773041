/**
 * The DNS component (issue 25). A node's names are not in it: the agent names each peer of its view
 * by its id (`<node>.<domain>`), so a name is in a node's view exactly when its peer is — scoped by
 * the policy as peers are, gone in the delta that unscopes or removes the peer, with nothing more
 * to send. The component carries what is the same for every member: the domain, the nameservers
 * (global and split), the search domains, the operator's extra records, and the foundation names
 * the control-node serves (every member has the control-node in its view: policy.ts CONTROL_NODE_TAG).
 */
import type { Dns, DnsRecord } from '../../contract/wire.js';
import type { NetworkState } from './network.js';
import { CONTROL_NODE_TAG } from './policy.js';
import type { MemberRecord } from './records.js';

/** A network's domain when none is set: `<network>.mesh`. */
export const DEFAULT_DNS_SUFFIX = 'mesh';

/** The foundation modules that get a name of their own when a control-node has them assigned. */
export const FOUNDATION_NAMES: readonly string[] = Object.freeze(['store', 'registry', 'bus', 'broker', 'control']);

export function emptyDns(): Dns {
  return { nameservers: [], searchDomains: [], records: [], domain: '', splits: [] };
}

/** A stored DNS component, from before the fields of issue 25 or after: every field there. */
export function dnsOf(d: Partial<Dns> | undefined): Dns {
  return {
    nameservers: [...(d?.nameservers ?? [])],
    searchDomains: [...(d?.searchDomains ?? [])],
    records: (d?.records ?? []).map((r) => ({ name: r.name, addresses: [...(r.addresses ?? [])], cname: r.cname ?? '' })),
    domain: d?.domain ?? '',
    splits: (d?.splits ?? []).map((s) => ({ domain: s.domain, nameservers: [...s.nameservers] })),
  };
}

/** The domain in force. */
export function meshDomain(network: string, dns: Pick<Dns, 'domain'>): string {
  return dns.domain || `${network}.${DEFAULT_DNS_SUFFIX}`.toLowerCase();
}

const bare = (a: string): string => a.replace(/\/\d+$/, '');

/** Each foundation module a control-node has assigned, named, answering the mesh addresses of the control-nodes that have it. */
export function foundationRecords(controlNodes: Iterable<MemberRecord>): DnsRecord[] {
  const by = new Map<string, string[]>();
  for (const m of controlNodes) {
    for (const name of FOUNDATION_NAMES) {
      if (!m.assigned.includes(name) || !m.addresses[0]) continue;
      const list = by.get(name) ?? [];
      list.push(bare(m.addresses[0]));
      by.set(name, list);
    }
  }
  return [...by.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([name, addresses]) => ({ name, addresses: [...new Set(addresses)].sort(), cname: '' }));
}

/** The network's control-nodes, through the tag index (no pass over every member). */
export function controlNodesOf(net: NetworkState): MemberRecord[] {
  const out: MemberRecord[] = [];
  for (const id of net.tags.members(CONTROL_NODE_TAG)) {
    const m = net.members.get(id);
    if (m) out.push(m);
  }
  return out;
}

/**
 * The component every member is sent: the operator's settings and the foundation names after the extra records (an extra record of the same name is the operator's word).
 */
export function dnsComponent(shared: Partial<Dns>, foundation: readonly DnsRecord[]): Dns {
  const d = dnsOf(shared);
  const taken = new Set(d.records.map((r) => r.name));
  const records = [...d.records, ...foundation.filter((r) => !taken.has(r.name))].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  // The domain travels only when the operator set one: the default is the agent's to compute from the
  // network's name (names.ts of the resolver), so a network that never set one sends what an agent of
  // every revision decodes alike.
  return { ...d, records };
}

/** The DNS component of the network as it is now. */
export function dnsFor(net: NetworkState): Dns {
  return dnsComponent(net.record.components.dns, foundationRecords(controlNodesOf(net)));
}

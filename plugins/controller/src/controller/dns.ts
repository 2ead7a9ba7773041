/**
 * A network's DNS (issue 25): what the operator set, read back with what the controller adds (the
 * domain in force, the foundation names), and replaced as one change whose preview names the nodes
 * whose answers change. The names of the nodes are not stored here: each agent names the peers of its
 * view (core delta/controller/dns.ts), so they follow the policy, renames and removals by themselves.
 */
import { MeshpError, type Dns, type DnsRecord } from '@meshp/core';
import { controlNodesOf, dnsComponent, dnsOf, foundationRecords, meshDomain } from '@meshp/core/delta';
import { canonicalJson } from '@meshp/core/reconcile';
import { checkDns } from '@meshp/core/schema';
import { setComponent } from './networks.js';
import type { ControllerState } from './state.js';

export interface DnsReadback {
  dns: Dns;
  domain: string;
  foundation: DnsRecord[];
}

export function getDns(s: ControllerState, network: string): DnsReadback {
  const net = s.net(network);
  const dns = dnsOf(net.record.components.dns);
  return { dns, domain: meshDomain(network, dns), foundation: foundationRecords(controlNodesOf(net)) };
}

export interface DnsChange {
  stateVersion: number;
  /** The members whose answers change: the component is the same for every member, so all of them or none. */
  changedNodes: string[];
}

/** Replaces the network's DNS (with `preview`: only says what it would change). */
export function setDns(s: ControllerState, network: string, wanted: Dns, preview: boolean): DnsChange {
  const dns = checkDns(dnsOf(wanted));
  const net = s.net(network);
  // A record named as a member is refused: the node's own name answers for it on every node that sees it.
  for (const r of dns.records) {
    if (net.members.has(r.name)) {
      throw new MeshpError('MESHP_DNS_INVALID', `dns: record ${r.name} is the name of a node of ${network}: a node's name is its own`, {
        details: { record: r.name },
      });
    }
  }
  const foundation = foundationRecords(controlNodesOf(net));
  const before = dnsComponent(net.record.components.dns, foundation);
  const after = dnsComponent(dns, foundation);
  const changedNodes = canonicalJson(before) === canonicalJson(after) ? [] : [...net.members.keys()].sort();
  if (preview) return { stateVersion: net.version, changedNodes };
  return { stateVersion: setComponent(s, network, 'dns', dns), changedNodes };
}

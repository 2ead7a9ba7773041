/**
 * The controller as the NAT labs that drive the tunnel plugin play it (relay-fallback, relay-paths),
 * with the controller's own functions: each member's record (its told endpoints, the mapping p0's
 * device saw, the relayed address it reported), its image as a peer (`endpointsOf`), p0 as the
 * control-node's peer, the deltas one version at a time, and `learn`, what the controller takes
 * from the reports (`mappingsOf` over p0's handshakes, each node's relayed address).
 */
import type { FilterRule, Peer, PeerHandshake, StateDelta } from '@meshp/core';
import { endpointsOf, mappingsOf } from '@meshp/core/delta';
import { WG_PORT, tunnelOf, type LabNode } from '../tunnel-wireguard/bed.js';
import { P0_IP } from './bed.js';

export interface Report {
  handshakes: PeerHandshake[] | null;
  relay: { relayId: string; relayedAddress: string } | null;
}
export const report = async (n: LabNode): Promise<Report> => (await n.request({ op: 'report' })) as unknown as Report;

export function playedController(p0: LabNode, nodes: LabNode[], rules: FilterRule[]) {
  const member = new Map(nodes.map((n) => [n.name, { endpoints: [] as string[], mappedEndpoint: '', relayedEndpoint: '' }]));
  const byName = new Map(nodes.map((n) => [n.name, n]));
  const version = new Map<LabNode, number>();
  const send = (n: LabNode, part: Partial<StateDelta>) => {
    const from = version.get(n) ?? 0;
    version.set(n, from + 1);
    return n.delta({
      network: 'lab',
      fromVersion: from,
      toVersion: from + 1,
      upsertPeers: [],
      removePeers: [],
      tunnel: tunnelOf(n),
      filter: { rules },
      ...part,
    });
  };
  const image = (of: LabNode): Peer => {
    const m = member.get(of.name)!;
    return {
      id: of.name,
      nodeKey: `ed25519-${of.name}`,
      addresses: [of.mesh],
      tags: ['site'],
      endpoints: endpointsOf({
        endpoints: m.endpoints,
        ...(m.mappedEndpoint ? { mappedEndpoint: m.mappedEndpoint } : {}),
        ...(m.relayedEndpoint ? { relayedEndpoint: m.relayedEndpoint } : {}),
      }),
      inboundOnly: false,
      tunnelKey: of.publicKey,
    };
  };
  const p0Peer: Peer = {
    id: 'p0',
    nodeKey: 'ed25519-p0',
    addresses: [p0.mesh],
    tags: ['control-node'],
    endpoints: [`${P0_IP}:${WG_PORT}`],
    inboundOnly: false,
    tunnelKey: p0.publicKey,
  };
  /** What the controller does with the reports: p0's teaches the mappings, each node's its relayed address. */
  const learn = async () => {
    const hs = (await report(p0)).handshakes ?? [];
    for (const m of mappingsOf(hs, new Date().toISOString(), (id) => ({
      tunnelKey: byName.get(id)?.publicKey ?? '',
      mappedEndpoint: member.get(id)?.mappedEndpoint ?? '',
    })))
      member.get(m.peer)!.mappedEndpoint = m.endpoint;
    for (const n of nodes) member.get(n.name)!.relayedEndpoint = (await report(n)).relay?.relayedAddress ?? '';
  };
  return { member, byName, send, image, p0Peer, learn };
}

/** Tables and JSON for the admin commands. */
import { table } from '../output.js';

export interface WireNodeStatus {
  network: string;
  name: string;
  mode: number;
  appliedVersion: number;
  stateVersion: number;
  gap: number;
  firewallKind: string;
  held: number;
  changed: number;
  assignedModules: string[];
  takenModules: string[];
  addresses: string[];
  tags: string[];
  stateHash: string;
}

export interface WireSent {
  fromVersion: number;
  toVersion: number;
  upserts: number;
  removals: number;
  components: string[];
  expectedHash: string;
  at: string;
}

export const modeName = (m: number): string => (m === 1 ? 'adopted' : m === 2 ? 'converged' : 'unknown');

/** The shape scripts rely on (`node list --json`). */
export function nodeJson(n: WireNodeStatus) {
  return {
    name: n.name, mode: modeName(n.mode), appliedVersion: n.appliedVersion, stateVersion: n.stateVersion, gap: n.gap,
    firewall: n.firewallKind, held: n.held, changed: n.changed,
    network: n.network, assigned: n.assignedModules, taken: n.takenModules, addresses: n.addresses, tags: n.tags,
  };
}

export function nodesTable(nodes: WireNodeStatus[]): string {
  return table(
    ['NODE', 'MODE', 'APPLIED', 'STATE', 'GAP', 'FIREWALL', 'HELD', 'CHANGED'],
    nodes.map((n) => [n.name, modeName(n.mode).toUpperCase(), n.appliedVersion, n.stateVersion, n.gap, n.firewallKind || '-', n.held, n.changed]),
  );
}

export function nodeDetail(n: WireNodeStatus): string {
  return [
    `node ${n.name} in ${n.network}: ${modeName(n.mode).toUpperCase()}`,
    `applied ${n.appliedVersion} of ${n.stateVersion} (gap ${n.gap})  firewall ${n.firewallKind || '-'}  held ${n.held}  changed ${n.changed}`,
    `addresses ${n.addresses.join(', ') || '-'}  tags ${n.tags.join(', ') || '-'}`,
    `assigned ${n.assignedModules.join(', ') || '-'}  taken ${n.takenModules.join(', ') || '-'}`,
  ].join('\n');
}

export function sentTable(sent: WireSent[]): string {
  return table(
    ['FROM', 'TO', 'UPSERTS', 'REMOVALS', 'COMPONENTS', 'EXPECTED HASH', 'AT'],
    sent.map((s) => [s.fromVersion === 0 ? 'snapshot' : s.fromVersion, s.toVersion, s.upserts, s.removals, s.components.join(',') || '-', s.expectedHash.slice(0, 12), s.at]),
  );
}

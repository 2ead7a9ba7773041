/** Tables and JSON for the admin commands. */
import { table } from '../output.js';
import type { NodeStatus, SentSummary } from '@meshp/controller';

/** A node status as the Admin service sends it: the controller's, with the mode as its wire number. */
export interface WireNodeStatus extends Omit<NodeStatus, 'mode' | 'convergePreviewId'> {
  mode: number;
  convergePreviewId?: string;
  lifecycle?: WireLifecycle;
  reportedVersion?: number;
  /** uint64: the 32-bit reportedVersion is 0 past 2^32. */
  reportedVersionWide?: number;
}

export interface WireLifecycle {
  state: string;
  previewId: string;
  steps: string[];
  code: string;
  message: string;
  at: string;
}

export interface WireResource {
  key: string;
  kind: string;
  module: string;
  state: string;
  reason: string;
}

export interface WireFirewall {
  kind: string;
  active: boolean;
  tables: string[];
  configFile: string;
}

/** What the controller sent, as doctor shows it: the controller's own summary, unchanged on the wire. */
export type WireSent = SentSummary;

export const modeName = (m: number): string => (m === 1 ? 'adopted' : m === 2 ? 'converged' : 'unknown');
/** An adopted node stands out wherever nodes are listed. */
export const modeShown = (m: number): string => (m === 1 ? 'ADOPTED' : modeName(m));

/** The node's lifecycle in a few words: what runs, what was refused. */
export function lifecycleNote(n: WireNodeStatus): string {
  const l = n.lifecycle;
  if (!l || !l.state) return n.mode === 2 && n.convergePreviewId ? `flip ${n.convergePreviewId} recorded, not reported yet` : '';
  if (l.state === 'refused') return `refused: ${l.code}`;
  if (l.state === 'flipping' || l.state === 'returning') return `${l.state}: ${l.steps.at(-1) ?? 'starting'}`;
  if (n.mode === 2 && l.state === 'adopted') return n.convergePreviewId ? `flip ${n.convergePreviewId} recorded, not reported yet` : 'converged declared, not reported yet';
  if (n.mode === 1 && l.state === 'converged') return 'adopt recorded, not reported yet';
  return l.state === 'converged' && l.previewId ? `flipped to preview ${l.previewId}` : '';
}

/** The shape scripts rely on (`node list --json`). */
export function nodeJson(n: WireNodeStatus) {
  return {
    name: n.name, mode: modeName(n.mode), appliedVersion: n.appliedVersion, stateVersion: n.stateVersion, gap: n.gap,
    firewall: n.firewallKind, held: n.held, changed: n.changed,
    network: n.network, assigned: n.assignedModules, taken: n.takenModules, addresses: n.addresses, tags: n.tags,
    convergePreviewId: n.convergePreviewId || null, lifecycle: n.lifecycle?.state ? n.lifecycle : null, reportedVersion: n.reportedVersionWide || n.reportedVersion || 0,
    diverged: n.diverged || null,
  };
}

export function nodesTable(nodes: WireNodeStatus[]): string {
  return table(
    ['NODE', 'MODE', 'APPLIED', 'STATE', 'GAP', 'FIREWALL', 'HELD', 'CHANGED', 'LIFECYCLE'],
    nodes.map((n) => [n.name, modeShown(n.mode), n.appliedVersion, n.stateVersion, n.gap, n.firewallKind || '-', n.held, n.changed, lifecycleNote(n) || '-']),
  );
}

export function nodeDetail(n: WireNodeStatus): string {
  return [
    `node ${n.name} in ${n.network}: ${modeShown(n.mode)}${n.convergePreviewId ? ` (flip recorded with preview ${n.convergePreviewId})` : ''}`,
    `applied ${n.appliedVersion} of ${n.stateVersion} (gap ${n.gap})  firewall ${n.firewallKind || '-'}  held ${n.held}  changed ${n.changed}`,
    `addresses ${n.addresses.join(', ') || '-'}  tags ${n.tags.join(', ') || '-'}`,
    `assigned ${n.assignedModules.join(', ') || '-'}  taken ${n.takenModules.join(', ') || '-'}`,
    ...(lifecycleNote(n) ? [`lifecycle: ${lifecycleNote(n)}`] : []),
  ].join('\n');
}

export function sentTable(sent: WireSent[]): string {
  return table(
    ['FROM', 'TO', 'UPSERTS', 'REMOVALS', 'COMPONENTS', 'EXPECTED HASH', 'AT'],
    sent.map((s) => [s.fromVersion === 0 ? 'snapshot' : s.fromVersion, s.toVersion, s.upserts, s.removals, s.components.join(',') || '-', s.expectedHash.slice(0, 12), s.at]),
  );
}

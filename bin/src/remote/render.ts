/** Tables and JSON for the admin commands. */
import { table } from '../output.js';
import type { wire } from '@meshp/transport-grpc';

/** The Admin service's shapes, as control.proto defines them (the typed admin map: no casts between). */
export type WireNodeStatus = wire.NodeStatus;
export type WireLifecycle = wire.Lifecycle;
export type WireResource = wire.ResourceStatus;
export type WireFirewall = wire.FirewallState;
export type WireSent = wire.SentDelta;

export const modeName = (m: number): string => (m === 1 ? 'adopted' : m === 2 ? 'converged' : 'unknown');
/** An adopted node stands out wherever nodes are listed; a node that has not reported has no mode to show. */
export const modeShown = (m: number): string => (m === 1 ? 'ADOPTED' : m === 2 ? 'converged' : '-');

/** The node's lifecycle in a few words, from the agent's word only: what was asked, what runs, what was refused. */
export function lifecycleNote(n: WireNodeStatus): string {
  const t = n.transition;
  const l = n.lifecycle;
  const asked = t ? (t.mode === 2 ? `converge${t.previewId ? ` to ${t.previewId}` : ''}` : 'adopt') : '';
  if (t?.state === 'requested') return `${asked} requested, not reported yet`;
  if (t?.state === 'in-progress') return `${l?.state ?? 'changing'}: ${l?.steps.at(-1) ?? 'starting'}`;
  if (t?.state === 'refused') return `${asked} refused: ${t.code}`;
  if (l?.state === 'converged' && l.previewId) return `flipped to preview ${l.previewId}`;
  return '';
}

/**
 * The way on from a refusal, where the refusal's own words do not give it. A machine in use enrolled
 * to be converged (a default token) is refused the flip without a preview; the agent's message says
 * how to converge it, which would close what no module declares (ssh among them). The way that keeps
 * it serving is said first: back to adopted (issue 33 item 6).
 */
export function adviceOf(n: WireNodeStatus): string {
  const inUse = (n.transition?.state === 'refused' && n.transition.code === 'MESHP_MACHINE_IN_USE') || (n.lifecycle?.state === 'refused' && n.lifecycle.code === 'MESHP_MACHINE_IN_USE');
  if (!inUse) return '';
  return `to keep ${n.name} serving as it is: meshp node adopt ${n.name} --yes (enrol a machine in use with a token from meshp token create --adopted); ` +
    `to converge it, which closes every port no module declares: meshp node converge ${n.name} --preview, then --yes --preview-id ID`;
}

/** What stands out: a node that is not ok says so in capitals, as `tailscale status` says offline. */
export const statusShown = (n: WireNodeStatus): string => (!n.status || n.status === 'ok' ? 'ok' : n.status.toUpperCase());

/** The shape scripts rely on (`node list --json`). */
export function nodeJson(n: WireNodeStatus) {
  return {
    name: n.name, mode: modeName(n.mode), requestedMode: modeName(n.requestedMode), status: n.status || 'pending', statusDetail: n.statusDetail || '',
    connected: n.connected, lastSeen: n.lastSeen || null,
    reconcile: n.reconcile?.result ? n.reconcile : null, refusedResources: n.refusedResources ?? 0,
    transition: n.transition ? { ...n.transition, mode: modeName(n.transition.mode) } : null,
    appliedVersion: n.appliedVersion, stateVersion: n.stateVersion, gap: n.gap,
    firewall: n.firewallKind, held: n.held, changed: n.changed,
    network: n.network, assigned: n.assignedModules, taken: n.takenModules, addresses: n.addresses, tags: n.tags,
    convergePreviewId: n.convergePreviewId || null, lifecycle: n.lifecycle?.state ? n.lifecycle : null, reportedVersion: n.reportedVersionWide || n.reportedVersion || 0,
    diverged: n.diverged || null, advice: adviceOf(n) || null,
    tunnel: n.tunnel || null, tunnelInterface: n.tunnelInterface || null,
  };
}

export function nodesTable(nodes: WireNodeStatus[]): string {
  return table(
    ['NODE', 'STATUS', 'MODE', 'APPLIED', 'STATE', 'GAP', 'FIREWALL', 'HELD', 'CHANGED', 'REFUSED', 'LAST SEEN', 'NOTE'],
    nodes.map((n) => [n.name, statusShown(n), modeShown(n.mode), n.appliedVersion, n.stateVersion, n.gap, n.firewallKind || '-', n.held, n.changed, n.refusedResources ?? 0, n.lastSeen || '-', [n.statusDetail, lifecycleNote(n), adviceOf(n) && `keep it serving: meshp node adopt ${n.name}`].filter(Boolean).join('; ') || '-']),
  );
}

export function nodeDetail(n: WireNodeStatus): string {
  return [
    `node ${n.name} in ${n.network}: ${modeShown(n.mode)} by its agent's last report${n.requestedMode !== n.mode ? `; ${modeName(n.requestedMode)} asked` : ''}${n.convergePreviewId ? ` (flip asked with preview ${n.convergePreviewId})` : ''}`,
    `status ${statusShown(n)}${n.statusDetail ? `: ${n.statusDetail}` : ''}; ${n.connected ? 'connected' : 'not connected'}; last seen ${n.lastSeen || 'never'}`,
    `last reconcile: ${n.reconcile?.result ? (n.reconcile.result === 'ok' ? `ok at ${n.reconcile.at}` : `refused: ${n.reconcile.code}: ${n.reconcile.message}`) : 'not reported'}; refused resources ${n.refusedResources ?? 0}`,
    `applied ${n.appliedVersion} of ${n.stateVersion} (gap ${n.gap})  firewall ${n.firewallKind || '-'}  held ${n.held}  changed ${n.changed}`,
    `addresses ${n.addresses.join(', ') || '-'}${meshAddressNote(n)}  tags ${n.tags.join(', ') || '-'}`,
    `assigned ${n.assignedModules.join(', ') || '-'}  taken ${n.takenModules.join(', ') || '-'}`,
    ...(lifecycleNote(n) ? [`lifecycle: ${lifecycleNote(n)}`] : []),
    ...(adviceOf(n) ? [`advice: ${adviceOf(n)}`] : []),
  ].join('\n');
}

/** A tunnel network's member whose tunnel is not up holds no mesh address: the allocation is not claimed as held. */
function meshAddressNote(n: WireNodeStatus): string {
  if (n.tunnel === 'up') return ` (tunnel ${n.tunnelInterface})`;
  if (n.tunnel === 'none') return ' (allocated, not held: no tunnel)';
  if (n.tunnel === 'down') return ` (allocated, not known to be held: tunnel ${n.tunnelInterface} failed)`;
  return '';
}

export function sentTable(sent: WireSent[]): string {
  return table(
    ['FROM', 'TO', 'UPSERTS', 'REMOVALS', 'COMPONENTS', 'EXPECTED HASH', 'AT'],
    sent.map((s) => [s.fromVersion === 0 ? 'snapshot' : s.fromVersion, s.toVersion, s.upserts, s.removals, s.components.join(',') || '-', s.expectedHash.slice(0, 12), s.at]),
  );
}

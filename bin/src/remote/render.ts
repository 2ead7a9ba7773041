/** Tables and JSON for the admin commands. */
import { WIRE_MODE } from '@meshp/core/delta';
import { table } from '../output.js';
import type { wire } from '@meshp/transport-grpc';

/** The Admin service's shapes, as control.proto defines them (the typed admin map: no casts between). */
export type WireNodeStatus = wire.NodeStatus;
export type WireLifecycle = wire.Lifecycle;
export type WireResource = wire.ResourceStatus;
export type WireFirewall = wire.FirewallState;
export type WireSent = wire.SentDelta;

export const modeName = (m: number): string => (m === WIRE_MODE.ADOPTED ? 'adopted' : m === WIRE_MODE.CONVERGED ? 'converged' : 'unknown');
/** An adopted node stands out wherever nodes are listed; a node that has not reported has no mode to show. */
export const modeShown = (m: number): string => (m === WIRE_MODE.ADOPTED ? 'ADOPTED' : m === WIRE_MODE.CONVERGED ? 'converged' : '-');

/** The node's lifecycle in a few words, from the agent's word only: what was asked, what runs, what was refused. */
export function lifecycleNote(n: WireNodeStatus): string {
  const t = n.transition;
  const l = n.lifecycle;
  const asked = t ? (t.mode === WIRE_MODE.CONVERGED ? `converge${t.previewId ? ` to ${t.previewId}` : ''}` : 'adopt') : '';
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
  const inUse =
    (n.transition?.state === 'refused' && n.transition.code === 'MESHP_MACHINE_IN_USE') ||
    (n.lifecycle?.state === 'refused' && n.lifecycle.code === 'MESHP_MACHINE_IN_USE');
  if (!inUse) return '';
  return (
    `to keep ${n.name} serving as it is: meshp node adopt ${n.name} --yes (enrol a machine in use with a token from meshp token create --adopted); ` +
    `to converge it, which closes every port no module declares: meshp node converge ${n.name} --preview, then --yes --preview-id ID`
  );
}

/** What stands out: a node that is not ok says so in capitals, as `tailscale status` says offline. */
export const statusShown = (n: WireNodeStatus): string => (!n.status || n.status === 'ok' ? 'ok' : n.status.toUpperCase());

/** "1m03s" from seconds. */
export function ago(seconds: number): string {
  const s = Math.max(0, Math.floor(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** LAST CONTACT: "now" while its stream is open (its keepalive answered within 30 s), else when the stream ended. */
export const contactShown = (n: WireNodeStatus): string => (n.connected ? 'now' : n.lastContact || n.lastSeen || 'never');

/** What a tunnel member's handshakes come to, in words ('' for a node without a tunnel). */
export function handshakesShown(n: WireNodeStatus): string {
  const h = n.handshakes;
  if (!h) return '';
  if (!h.reported) return 'its agent does not report handshakes (unverified)';
  if (h.peers === 0) return 'no peer configured';
  const newest = h.newestAgeSeconds < 0 ? 'no handshake yet' : `newest handshake ${ago(h.newestAgeSeconds)} ago`;
  return `${h.peers} peer${h.peers === 1 ? '' : 's'}, ${newest} (NO-HANDSHAKE past ${h.staleAfterSeconds} s)`;
}

/**
 * One line per tunnel peer (issue 27), as the node's device said: the state (CONNECTED only on a
 * handshake within the limit), the path and endpoint, the handshake's age.
 */
export function peerPathLines(n: WireNodeStatus): string[] {
  return (n.handshakes?.paths ?? []).map((p) => {
    const age = p.ageSeconds < 0 ? 'no handshake yet' : `last handshake ${ago(p.ageSeconds)} ago`;
    const via = !p.endpoint
      ? 'no endpoint'
      : p.path === 'trying'
        ? `trying a direct path via ${p.endpoint} (the handshake was on the relay)`
        : `${p.path || 'direct'} via ${p.endpoint}`;
    return `  peer ${p.peer}: ${p.state || 'unknown'}, ${via}, ${age}`;
  });
}

/** GAP in words: STATE − APPLIED when a change since APPLIED concerns the node, else 0 (lazy fan-out). */
export function gapShown(n: WireNodeStatus): string {
  const since = n.stateVersion - n.appliedVersion;
  if (n.gap > 0) return `gap ${n.gap}: a change since ${n.appliedVersion} concerns it, not applied yet`;
  if (since > 0) return `gap 0: the ${since} version${since === 1 ? '' : 's'} since ${n.appliedVersion} do not change its view`;
  return 'gap 0';
}

/** The shape scripts rely on (`node list --json`). */
export function nodeJson(n: WireNodeStatus) {
  return {
    name: n.name,
    mode: modeName(n.mode),
    requestedMode: modeName(n.requestedMode),
    status: n.status || 'pending',
    statusDetail: n.statusDetail || '',
    reasons: n.reasons.map((r) => ({ status: r.status, detail: r.detail })),
    connected: n.connected,
    lastSeen: n.lastSeen || null,
    lastContact: n.connected ? 'now' : n.lastContact || null,
    handshakes: n.handshakes
      ? {
          reported: n.handshakes.reported,
          peers: n.handshakes.peers,
          newestAgeSeconds: n.handshakes.newestAgeSeconds < 0 ? null : n.handshakes.newestAgeSeconds,
          staleAfterSeconds: n.handshakes.staleAfterSeconds,
          paths: n.handshakes.paths.map((p) => ({
            peer: p.peer,
            state: p.state,
            path: p.path || null,
            endpoint: p.endpoint || null,
            ageSeconds: p.ageSeconds < 0 ? null : p.ageSeconds,
          })),
        }
      : null,
    reconcile: n.reconcile?.result ? n.reconcile : null,
    refusedResources: n.refusedResources ?? 0,
    transition: n.transition ? { ...n.transition, mode: modeName(n.transition.mode) } : null,
    appliedVersion: n.appliedVersion,
    stateVersion: n.stateVersion,
    gap: n.gap,
    firewall: n.firewallKind,
    held: n.held,
    changed: n.changed,
    network: n.network,
    assigned: n.assignedModules,
    taken: n.takenModules,
    addresses: n.addresses,
    tags: n.tags,
    convergePreviewId: n.convergePreviewId || null,
    lifecycle: n.lifecycle?.state ? n.lifecycle : null,
    reportedVersion: n.reportedVersionWide || n.reportedVersion || 0,
    diverged: n.diverged || null,
    advice: adviceOf(n) || null,
    tunnel: n.tunnel || null,
    tunnelInterface: n.tunnelInterface || null,
    tunnelKey: n.tunnelKey || null,
    // issue 28 (ADR 0041): when its credential expires (null never), and whether it did.
    expiresAt: n.expiresAt || null,
    expired: !!n.expiredAt,
    expiredAt: n.expiredAt || null,
    ephemeral: n.ephemeral,
    ephemeralGraceSeconds: n.ephemeral ? n.ephemeralGraceSeconds : null,
    // issue 26 (ADR 0039): the exit node the node uses, why, and its primary (null: none).
    exitNode: n.exitNode || null,
    exitNodeReason: n.exitNodeReason || null,
    exitNodePrimary: n.exitNodePrimary || null,
  };
}

/** issue 28: a node an ephemeral token enrolled, and how long it may be gone. */
const ephemeralNote = (n: WireNodeStatus): string => (n.ephemeral ? `ephemeral: removed after ${n.ephemeralGraceSeconds}s without a stream` : '');

/** The exit node line of `node show` and `doctor` ('' when none is asked). */
export function exitNodeLine(n: WireNodeStatus): string {
  if (n.exitNode) return `exit node: ${n.exitNode} (${n.exitNodeReason}; primary ${n.exitNodePrimary})`;
  return n.exitNodeReason ? `exit node: none (${n.exitNodeReason})` : '';
}

export function nodesTable(nodes: WireNodeStatus[]): string {
  return table(
    ['NODE', 'STATUS', 'MODE', 'APPLIED', 'STATE', 'GAP', 'FIREWALL', 'HELD', 'CHANGED', 'REFUSED', 'LAST CONTACT', 'NOTE'],
    nodes.map((n) => [
      n.name,
      statusShown(n),
      modeShown(n.mode),
      n.appliedVersion,
      n.stateVersion,
      n.gap,
      n.firewallKind || '-',
      n.held,
      n.changed,
      n.refusedResources ?? 0,
      contactShown(n),
      [...n.reasons.map((r) => r.detail), lifecycleNote(n), ephemeralNote(n), adviceOf(n) && `keep it serving: meshp node adopt ${n.name}`]
        .filter(Boolean)
        .join('; ') || '-',
    ]),
  );
}

export function nodeDetail(n: WireNodeStatus): string {
  return [
    `node ${n.name} in ${n.network}: ${modeShown(n.mode)} by its agent's last report${n.requestedMode !== n.mode ? `; ${modeName(n.requestedMode)} asked` : ''}${n.convergePreviewId ? ` (flip asked with preview ${n.convergePreviewId})` : ''}`,
    `status ${statusShown(n)}${n.statusDetail ? `: ${n.statusDetail}` : ''}; ${n.connected ? 'connected (last contact now)' : `not connected (last contact ${n.lastContact || 'never'})`}; last message ${n.lastSeen || 'never'}`,
    ...n.reasons.slice(1).map((r) => `  also ${r.status.toUpperCase()}: ${r.detail}`),
    ...(handshakesShown(n) ? [`tunnel: ${handshakesShown(n)}`, ...peerPathLines(n)] : []),
    `last reconcile: ${n.reconcile?.result ? (n.reconcile.result === 'ok' ? `ok at ${n.reconcile.at}` : `refused: ${n.reconcile.code}: ${n.reconcile.message}`) : 'not reported'}; refused resources ${n.refusedResources ?? 0}`,
    `applied ${n.appliedVersion} of ${n.stateVersion} (${gapShown(n)})  firewall ${n.firewallKind || '-'}  held ${n.held}  changed ${n.changed}`,
    `addresses ${n.addresses.join(', ') || '-'}${meshAddressNote(n)}  tags ${n.tags.join(', ') || '-'}`,
    `assigned ${n.assignedModules.join(', ') || '-'}  taken ${n.takenModules.join(', ') || '-'}`,
    n.expiredAt ? `credential: expired ${n.expiredAt} (meshp node renew ${n.name})` : `credential: ${n.expiresAt ? `expires ${n.expiresAt}` : 'never expires'}`,
    ...(lifecycleNote(n) ? [`lifecycle: ${lifecycleNote(n)}`] : []),
    ...(ephemeralNote(n) ? [ephemeralNote(n)] : []),
    ...(adviceOf(n) ? [`advice: ${adviceOf(n)}`] : []),
    ...(exitNodeLine(n) ? [exitNodeLine(n)] : []),
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
    sent.map((s) => [
      s.fromVersion === 0 ? 'snapshot' : s.fromVersion,
      s.toVersion,
      s.upserts,
      s.removals,
      s.components.join(',') || '-',
      s.expectedHash.slice(0, 12),
      s.at,
    ]),
  );
}

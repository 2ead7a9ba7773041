/**
 * A node as the operator sees it. Its `mode` is what its agent last reported, never what was asked:
 * the mode asked is `requestedMode`, and the change between the two is a transition
 * (requested → in-progress → done | refused) read from the agent's reports past the version the
 * request was recorded at. `status` is the one word that makes a node needing attention stand out.
 */
import type { Mode } from '@meshp/core';
import type { MemberRecord, NetworkState, ReportedHandshakes, ReportedState, SyncRecord } from '@meshp/core/delta';
import { exitNodeOfNet } from './controller/exit-status.js';
import { HANDSHAKE_STALE_SECONDS, handshakeReason, handshakesNow, unreachablePeers, type NodeHandshakes } from './handshake-status.js';

export type TransitionState = 'none' | 'requested' | 'in-progress' | 'done' | 'refused';

export interface NodeTransition {
  state: TransitionState;
  /** The mode asked. */
  mode: Mode;
  /** The state version the request was recorded at (0: none since the node joined). */
  version: number;
  previewId: string;
  code: string;
  message: string;
}

export interface ReconcileStatus {
  /** '' until the agent reports one. */
  result: '' | 'ok' | 'refused';
  code: string;
  message: string;
  at: string;
}

/**
 * ok | behind | changing | refusing | silent | pending (never reported) | diverged (hash mismatches, see
 * sync.ts) | no-handshake (a tunnel member none of whose peers handshaked within the limit: nothing
 * flows) | peer-unreachable (a tunnel member with a handshake going on, and a peer it had none with within
 * the limit: each named) | unverified (a tunnel member whose agent does not report handshakes: not observed)
 * | no-tunnel (a member of a tunnel network whose agent runs no tunnel, or one that is not up) | expired (its
 * credential expired, ADR 0041: refused at its hello, out of every peer's view until renewed; said first).
 */
export type NodeHealth =
  'expired' | 'ok' | 'behind' | 'changing' | 'refusing' | 'silent' | 'pending' | 'diverged' | 'no-tunnel' | 'no-handshake' | 'peer-unreachable' | 'unverified';

/** In a tunnel network: up | none | down, by the agent's last report; '' outside one, or before a report says. */
export type TunnelHealth = '' | 'up' | 'none' | 'down';

/** One thing that stands out of a node, with what was observed. */
export interface StatusReason {
  status: Exclude<NodeHealth, 'ok'>;
  detail: string;
}

/**
 * A membership as the operator sees it. `gap` is what the node has yet to apply of what concerns it:
 * the latest version that changed its view minus `appliedVersion` (a change that does not concern it
 * is nothing to apply, so `appliedVersion` may stay below `stateVersion` at gap 0).
 */
export interface NodeStatus {
  network: string;
  name: string;
  /** The mode the agent last reported; 'unknown' until it reports. */
  mode: Mode | 'unknown';
  requestedMode: Mode;
  appliedVersion: number;
  stateVersion: number;
  gap: number;
  firewallKind: string;
  held: number;
  changed: number;
  tags: string[];
  addresses: string[];
  assignedModules: string[];
  takenModules: string[];
  stateHash: string;
  /** The preview the node's flip was recorded with ('' when none). */
  convergePreviewId: string;
  transition: NodeTransition;
  reconcile: ReconcileStatus;
  refusedResources: number;
  /** The refused resources' codes with their counts (not on the wire: said in statusDetail and by /metrics). */
  refusedCodes: Record<string, number>;
  /** Filled by the hosting side, which holds the streams (see `withLiveness`). */
  connected: boolean;
  /** The agent's last message on its stream (hello, ack, report, resync); its last report's time when none was heard here. */
  lastSeen: string;
  /** When its agent made its last report, by the agent's clock ('' none). */
  reportedAt: string;
  /** The last time its stream was known open: now while connected (keepalives every 20 s, 10 s to answer), else when it ended. */
  lastContact: string;
  /** Whether the node enrolled a tunnel key: its handshakes are judged. */
  tunnelMember: boolean;
  /** The handshakes as last reported (not on the wire: `handshakes` says what they come to now). */
  reportedHandshakes?: ReportedHandshakes;
  /** A tunnel member's handshakes now; absent for a node without a tunnel. */
  handshakes?: NodeHandshakes;
  status: NodeHealth;
  statusDetail: string;
  /** Everything that stands out, worst first: `status` and `statusDetail` are the first; [] when ok. */
  reasons: StatusReason[];
  /** Set when snapshots to this membership stopped (bounded resync): a MESHP code and why; '' otherwise. */
  diverged: string;
  tunnel: TunnelHealth;
  /** The tunnel's interface as the agent reported it ('' when none). */
  tunnelInterface: string;
  /** issue 28: enrolled with an ephemeral token (removed after `ephemeralGraceSeconds` without a stream). */
  ephemeral: boolean;
  ephemeralGraceSeconds: number;
  /** Why the tunnel is not up, as the agent reported it (not on the wire: said in statusDetail). */
  tunnelError: string;
  /** When the node's credential expires ('' never: ADR 0041). */
  expiresAt: string;
  /** When the controller recorded it expired ('' not expired). */
  expiredAt: string;
  /** Its WireGuard public key as the controller holds it ('' none): meshp node rekey waits for a new one. */
  tunnelKey: string;
  /** The exit node the node uses ('' none), why, and its primary (ADR 0039: controller/routes.ts exitNodeOfNet). */
  exitNode: string;
  exitNodeReason: string;
  exitNodePrimary: string;
}

export function newSync(): SyncRecord {
  return {
    applied: 0,
    appliedHash: '',
    sent: 0,
    expectations: [],
    snapshotPending: true,
    recent: [],
    lastAgentHash: '',
    firewallKind: '',
    held: 0,
    changed: 0,
  };
}

/** The mode the machine is in by its agent's word: a running flip is still adopted, a running return still converged. */
export function reportedMode(r: ReportedState | undefined): Mode | 'unknown' {
  if (!r) return 'unknown';
  switch (r.lifecycle?.state) {
    case 'converged':
    case 'returning':
      return 'converged';
    case 'adopted':
    case 'flipping':
      return 'adopted';
    default:
      return r.mode;
  }
}

export function transitionOf(m: MemberRecord, s: SyncRecord): NodeTransition {
  const version = s.requestedVersion ?? 0;
  const base = { mode: m.mode, version, previewId: m.mode === 'converged' ? (m.convergePreviewId ?? '') : '', code: '', message: '' };
  const r = s.reported;
  // The mode the node enrolled with is asked too: a converged enrolment the agent refused (a machine in use) is refused.
  if (version === 0)
    return r?.lifecycle?.state === 'refused'
      ? { ...base, state: 'refused', code: r.lifecycle.code || 'MESHP_REFUSED', message: r.lifecycle.message }
      : { ...base, state: 'none' };
  if (!r || r.version < version) return { ...base, state: 'requested' };
  const l = r.lifecycle;
  if (l?.state === 'flipping' || l?.state === 'returning') return { ...base, state: 'in-progress' };
  if (l?.state === 'refused') return { ...base, state: 'refused', code: l.code || 'MESHP_REFUSED', message: l.message };
  return { ...base, state: reportedMode(r) === m.mode ? 'done' : 'requested' };
}

export function statusOf(net: NetworkState, m: MemberRecord, s: SyncRecord): NodeStatus {
  const r = s.reported;
  const n: NodeStatus = {
    network: net.record.name,
    name: m.id,
    mode: reportedMode(r),
    requestedMode: m.mode,
    appliedVersion: s.applied,
    stateVersion: net.version,
    // Lazy fan-out: an idle node whose view did not change is not behind (target: see core/src/delta/sync.ts).
    gap: Math.max(0, (s.target ?? net.version) - s.applied),
    firewallKind: s.firewallKind,
    held: s.held,
    changed: s.changed,
    tags: [...m.tags],
    addresses: [...m.addresses],
    assignedModules: [...m.assigned],
    takenModules: [...m.taken],
    stateHash: s.appliedHash,
    convergePreviewId: m.mode === 'converged' ? (m.convergePreviewId ?? '') : '',
    transition: transitionOf(m, s),
    reconcile: r?.reconcile
      ? { result: r.reconcile.result, code: r.reconcile.code, message: r.reconcile.message, at: r.reconcile.at }
      : { result: '', code: '', message: '', at: '' },
    refusedResources: r?.refusedResources ?? 0,
    refusedCodes: { ...(r?.refusedCodes ?? {}) },
    connected: false,
    lastSeen: '',
    lastContact: '',
    reportedAt: r?.at ?? '',
    tunnelMember: !!m.tunnelKey,
    ...(r?.handshakes ? { reportedHandshakes: { ...r.handshakes } } : {}),
    status: 'pending',
    statusDetail: '',
    reasons: [],
    diverged: s.diverged ?? '',
    ephemeral: !!m.ephemeralSeconds,
    ephemeralGraceSeconds: m.ephemeralSeconds ?? 0,
    ...tunnelOf(net, r),
    expiresAt: m.expiresAt ?? '',
    expiredAt: m.expiredAt ?? '',
    tunnelKey: m.tunnelKey ?? '',
    ...exitOf(net, m.id),
  };
  return withLiveness(n, { connected: false, lastSeen: r?.at ?? '' });
}

/** What the hosting side knows of a node's stream, and the rules' inputs that are not the node's own. */
export interface Liveness {
  connected: boolean;
  lastSeen: string;
  /** Now while connected, else when the stream ended ('' unknown). */
  lastContact?: string;
  diverged?: string;
  /** The time the status is for (ms since the epoch). Default: now. */
  now?: number;
  /** No handshake with any peer within this is `no-handshake`. Default HANDSHAKE_STALE_SECONDS. */
  handshakeStaleSeconds?: number;
}

/**
 * The node with its stream's liveness and what stands out, worst first: a node that does not answer,
 * then one diverged, one that refuses, one whose tunnel carries nothing, one whose change of mode is
 * under way, one not reported, one behind, one whose tunnel was not observed. `status` is the first.
 */
export function withLiveness(n: NodeStatus, live: Liveness): NodeStatus {
  const now = live.now ?? Date.now();
  const { handshakes: _was, ...rest } = n;
  const out: NodeStatus = {
    ...rest,
    connected: live.connected,
    lastSeen: live.lastSeen || n.lastSeen,
    lastContact: live.lastContact ?? n.lastContact,
    ...(n.tunnelMember ? { handshakes: handshakesNow(n.reportedHandshakes, now, live.handshakeStaleSeconds ?? HANDSHAKE_STALE_SECONDS) } : {}),
  };
  const reasons = reasonsOf(out, live.diverged || n.diverged, now);
  return { ...out, reasons, status: reasons[0]?.status ?? 'ok', statusDetail: reasons[0]?.detail ?? '' };
}

/** Each rule in the order of how bad what it finds is; a status appears once. */
function reasonsOf(n: NodeStatus, diverged: string | undefined, now: number): StatusReason[] {
  const found: (StatusReason | null)[] = [
    n.expiredAt
      ? { status: 'expired', detail: `its credential expired (${n.expiredAt}): refused at its hello, out of its peers' views; meshp node renew ${n.name}` }
      : null,
    n.connected
      ? null
      : n.lastSeen
        ? { status: 'silent', detail: `not connected${n.lastContact ? ` (its stream ended ${n.lastContact})` : ''}; last seen ${n.lastSeen}` }
        : { status: 'pending', detail: 'has not reported yet' },
    diverged ? { status: 'diverged', detail: diverged } : null,
    refusal(n),
    tunnelSaid(n),
    // No tunnel up: no handshake to judge (no-tunnel says why).
    ...tunnelReasons(n, now),
    n.transition.state === 'requested' || n.transition.state === 'in-progress'
      ? { status: 'changing', detail: `${n.transition.mode} ${n.transition.state}` }
      : null,
    n.mode === 'unknown' ? { status: 'pending', detail: 'has not reported yet' } : null,
    n.gap > 0 ? { status: 'behind', detail: `behind by ${n.gap}` } : null,
  ];
  const seen = new Set<string>();
  const out: StatusReason[] = [];
  for (const r of found) {
    if (!r || seen.has(r.status)) continue;
    seen.add(r.status);
    out.push(r);
  }
  // unverified sorts last: not observed is said, but never over anything observed.
  return out.sort((a, b) => Number(a.status === 'unverified') - Number(b.status === 'unverified'));
}

/** no-handshake (nothing flows), else peer-unreachable (some peers have no handshake within the limit), else unverified. */
function tunnelReasons(n: NodeStatus, now: number): (StatusReason | null)[] {
  if (!n.handshakes || n.tunnel === 'none' || n.tunnel === 'down') return [];
  const whole = handshakeReason(n.reportedHandshakes, n.handshakes, now, n.mode !== 'unknown');
  return [whole, whole ? null : unreachablePeers(n.handshakes)];
}

function refusal(n: NodeStatus): StatusReason | null {
  if (n.reconcile.result === 'refused') return { status: 'refusing', detail: `${n.reconcile.code}: ${n.reconcile.message}${codesSaid(n)}` };
  if (n.transition.state === 'refused')
    return { status: 'refusing', detail: `${n.transition.mode === 'converged' ? 'flip' : 'return'} refused: ${n.transition.code}: ${n.transition.message}` };
  if (n.refusedResources > 0) return { status: 'refusing', detail: `${n.refusedResources} resource(s) refused${codesSaid(n)}` };
  return null;
}

/** The tunnel a member of a tunnel network runs, by its agent's last report (issue 33). */
export function tunnelOf(net: NetworkState, r: ReportedState | undefined): Pick<NodeStatus, 'tunnel' | 'tunnelInterface' | 'tunnelError'> {
  const t = r?.tunnel;
  if (net.record.privateNetwork !== 'tunnel' || !t) return { tunnel: '', tunnelInterface: t?.interface ?? '', tunnelError: '' };
  return { tunnel: !t.key ? 'none' : t.error ? 'down' : 'up', tunnelInterface: t.interface, tunnelError: t.error };
}

/**
 * A member of a tunnel network without a working tunnel is not ok, and its mesh address is not
 * claimed: allocated by the controller, it is held only by a tunnel that is up.
 */
function tunnelSaid(n: NodeStatus): StatusReason | null {
  const address = n.addresses.join(', ') || '-';
  if (n.tunnel === 'none')
    return {
      status: 'no-tunnel',
      detail: `a member of a tunnel network whose agent runs no tunnel (--tunnel none, or an agent that does not raise one): its mesh address ${address} is not held`,
    };
  if (n.tunnel === 'down')
    return {
      status: 'no-tunnel',
      detail: `its tunnel${n.tunnelInterface ? ` ${n.tunnelInterface}` : ''} failed: ${n.tunnelError}; its mesh address ${address} is not known to be held`,
    };
  return null;
}

/** " (MESHP_A 2, MESHP_B 1)": which codes the refused resources carry; '' when none is known. */
function codesSaid(n: NodeStatus): string {
  const codes = Object.entries(n.refusedCodes ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return codes.length ? ` (${codes.map(([c, k]) => `${c} ${k}`).join(', ')})` : '';
}

/** The exit node a node uses, as `node show`, `doctor` and `/metrics` say it (ADR 0039). */
function exitOf(net: NetworkState, id: string): Pick<NodeStatus, 'exitNode' | 'exitNodeReason' | 'exitNodePrimary'> {
  const e = exitNodeOfNet(net, id);
  return { exitNode: e.exitNode, exitNodeReason: e.reason, exitNodePrimary: e.primary };
}

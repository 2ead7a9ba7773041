/**
 * A node as the operator sees it. Its `mode` is what its agent last reported, never what was asked:
 * the mode asked is `requestedMode`, and the change between the two is a transition
 * (requested → in-progress → done | refused) read from the agent's reports past the version the
 * request was recorded at. `status` is the one word that makes a node needing attention stand out.
 */
import type { Mode } from '@meshp/core';
import type { MemberRecord, NetworkState, ReportedState, SyncRecord } from '@meshp/core/delta';

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
 * ok | behind | changing | refusing | silent | pending (never reported) | diverged (hash mismatches, see sync.ts)
 * | no-tunnel (a member of a tunnel network whose agent runs no tunnel, or one that is not up).
 */
export type NodeHealth = 'ok' | 'behind' | 'changing' | 'refusing' | 'silent' | 'pending' | 'diverged' | 'no-tunnel';

/** In a tunnel network: up | none | down, by the agent's last report; '' outside one, or before a report says. */
export type TunnelHealth = '' | 'up' | 'none' | 'down';

/** A membership as the operator sees it: `gap` is the convergence gap. */
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
  lastSeen: string;
  status: NodeHealth;
  statusDetail: string;
  /** Set when snapshots to this membership stopped (bounded resync): a MESHP code and why; '' otherwise. */
  diverged: string;
  tunnel: TunnelHealth;
  /** The tunnel's interface as the agent reported it ('' when none). */
  tunnelInterface: string;
  /** Why the tunnel is not up, as the agent reported it (not on the wire: said in statusDetail). */
  tunnelError: string;
}

export function newSync(): SyncRecord {
  return { applied: 0, appliedHash: '', sent: 0, expectations: [], snapshotPending: true, recent: [], lastAgentHash: '', firewallKind: '', held: 0, changed: 0 };
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
  if (version === 0) return r?.lifecycle?.state === 'refused' ? { ...base, state: 'refused', code: r.lifecycle.code || 'MESHP_REFUSED', message: r.lifecycle.message } : { ...base, state: 'none' };
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
    reconcile: r?.reconcile ? { result: r.reconcile.result, code: r.reconcile.code, message: r.reconcile.message, at: r.reconcile.at } : { result: '', code: '', message: '', at: '' },
    refusedResources: r?.refusedResources ?? 0,
    refusedCodes: { ...(r?.refusedCodes ?? {}) },
    connected: false,
    lastSeen: '',
    status: 'pending',
    statusDetail: '',
    diverged: s.diverged ?? '',
    ...tunnelOf(net, r),
  };
  return withLiveness(n, { connected: false, lastSeen: r?.at ?? '' });
}

/**
 * The node with its stream's liveness and the word that stands out, worst first: a node that does
 * not answer, then one that refuses, then one whose change of mode is under way, then one behind.
 */
export function withLiveness(n: NodeStatus, live: { connected: boolean; lastSeen: string; diverged?: string }): NodeStatus {
  const out = { ...n, connected: live.connected, lastSeen: live.lastSeen || n.lastSeen };
  const [status, statusDetail] = health(out, live.diverged || n.diverged);
  return { ...out, status, statusDetail };
}

function health(n: NodeStatus, diverged?: string): [NodeHealth, string] {
  if (!n.connected) return n.lastSeen ? ['silent', `not connected; last seen ${n.lastSeen}`] : ['pending', 'has not reported yet'];
  if (diverged) return ['diverged', diverged];
  if (n.reconcile.result === 'refused') return ['refusing', `${n.reconcile.code}: ${n.reconcile.message}${codesSaid(n)}`];
  if (n.transition.state === 'refused') return ['refusing', `${n.transition.mode === 'converged' ? 'flip' : 'return'} refused: ${n.transition.code}: ${n.transition.message}`];
  if (n.refusedResources > 0) return ['refusing', `${n.refusedResources} resource(s) refused${codesSaid(n)}`];
  const tunnel = tunnelSaid(n);
  if (tunnel) return tunnel;
  if (n.transition.state === 'requested' || n.transition.state === 'in-progress') return ['changing', `${n.transition.mode} ${n.transition.state}`];
  if (n.mode === 'unknown') return ['pending', 'has not reported yet'];
  if (n.gap > 0) return ['behind', `behind by ${n.gap}`];
  return ['ok', ''];
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
function tunnelSaid(n: NodeStatus): [NodeHealth, string] | null {
  const address = n.addresses.join(', ') || '-';
  if (n.tunnel === 'none') return ['no-tunnel', `a member of a tunnel network whose agent runs no tunnel (--tunnel none, or an agent that does not raise one): its mesh address ${address} is not held`];
  if (n.tunnel === 'down') return ['no-tunnel', `its tunnel${n.tunnelInterface ? ` ${n.tunnelInterface}` : ''} failed: ${n.tunnelError}; its mesh address ${address} is not known to be held`];
  return null;
}

/** " (MESHP_A 2, MESHP_B 1)": which codes the refused resources carry; '' when none is known. */
function codesSaid(n: NodeStatus): string {
  const codes = Object.entries(n.refusedCodes ?? {}).sort(([a], [b]) => a.localeCompare(b));
  return codes.length ? ` (${codes.map(([c, k]) => `${c} ${k}`).join(', ')})` : '';
}

import type { Mode } from '@meshp/core';
import type { NetworkState } from './network.js';
import type { MemberRecord, SyncRecord } from './types.js';

/** A membership as the operator sees it: `gap` is the convergence gap. */
export interface NodeStatus {
  network: string;
  name: string;
  mode: Mode;
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
  /** Set when snapshots to this membership stopped (bounded resync): a MESHP code and why; '' otherwise. */
  diverged: string;
}

export function newSync(): SyncRecord {
  return { applied: 0, appliedHash: '', sent: 0, expectations: [], snapshotPending: true, recent: [], lastAgentHash: '', firewallKind: '', held: 0, changed: 0 };
}

export function statusOf(net: NetworkState, m: MemberRecord, s: SyncRecord): NodeStatus {
  return {
    network: net.record.name,
    name: m.id,
    mode: m.mode,
    appliedVersion: s.applied,
    stateVersion: net.version,
    // Lazy fan-out: an idle node whose view did not change is not behind (target: see sync.ts).
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
    diverged: s.diverged ?? '',
  };
}

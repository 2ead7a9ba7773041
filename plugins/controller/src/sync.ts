/**
 * The delta protocol's server side for one membership: what to send it next, and what its acks
 * and hellos mean for its sync record. These functions change the record in place; persisting it
 * is the caller's (the controller, in one store transaction).
 */
import { MeshpError, loadDigest, stateHash, storeDigest, type StateDelta } from '@meshp/core';
import { computeIncremental, computeSnapshot, type Computed } from './compute.js';
import type { NetworkState } from './network.js';
import type { SentSummary, SyncRecord } from './types.js';

export interface AckResult {
  accepted: boolean;
  /** The agent's hash differed from the one computed for that version (or the version is unknown). */
  snapshotPending: boolean;
  /** The hello named a version past this controller's: its state is an older copy (see `Controller.hello`). */
  movedAhead?: { from: number; to: number };
}

/** Expected hashes kept per membership, one per version sent and not yet acked. */
const EXPECTATIONS = 64;
/** Versions stay safe integers however far a restored controller moves ahead. */
const MAX_VERSION = 2 ** 50;

/**
 * What to send the node now: a delta from where it will be once it applied what it was sent, or a
 * snapshot when that is unknown, not reachable through the log, or its hash was wrong. Null: nothing to send.
 */
export function nextDelta(net: NetworkState, id: string, sync: SyncRecord, at: string, keepSent: number): StateDelta | null {
  if (sync.sent === net.version && !sync.snapshotPending) return null;
  const base = sync.snapshotPending ? undefined : sync.expectations.find((e) => e.version === sync.sent);
  const computed: Computed = (base && computeIncremental(net, id, sync.sent, loadDigest(base.digest))) ?? computeSnapshot(net, id);
  const hash = stateHash(computed.digest);
  sync.snapshotPending = false;
  sync.sent = net.version;
  sync.expectations = [...sync.expectations.filter((e) => e.version !== net.version), { version: net.version, hash, digest: storeDigest(computed.digest) }]
    .filter((e) => e.version >= sync.applied)
    .slice(-EXPECTATIONS);
  sync.recent = [...sync.recent, summary(computed.delta, hash, at)].slice(-keepSent);
  return computed.delta;
}

/** Only an ack whose hash matches the one computed for its version moves the applied version. */
export function takeAck(sync: SyncRecord, appliedVersion: number, hash: string): AckResult {
  sync.lastAgentHash = hash;
  const expected = sync.expectations.find((e) => e.version === appliedVersion);
  let accepted = false;
  if (expected && expected.hash === hash) {
    accepted = true;
    if (appliedVersion > sync.applied || sync.applied === 0) {
      sync.applied = appliedVersion;
      sync.appliedHash = hash;
      sync.expectations = sync.expectations.filter((e) => e.version >= appliedVersion);
    }
  } else if (!(appliedVersion === sync.applied && hash === sync.appliedHash && sync.applied > 0)) {
    sync.snapshotPending = true;
  }
  return { accepted, snapshotPending: sync.snapshotPending };
}

/** A new stream: resume from the agent's own version when its hash is the one expected, else snapshot. */
export function takeHello(sync: SyncRecord, appliedVersion: number, hash: string): AckResult {
  const result = takeAck(sync, appliedVersion, hash);
  if (result.accepted || (appliedVersion === sync.applied && hash === sync.appliedHash && sync.applied > 0)) {
    sync.sent = appliedVersion;
    sync.snapshotPending = !sync.expectations.some((e) => e.version === appliedVersion);
  } else sync.snapshotPending = true;
  return { accepted: result.accepted, snapshotPending: sync.snapshotPending };
}

/** A hello's version must be one a controller could have sent. */
export function checkAppliedVersion(appliedVersion: number): void {
  if (!Number.isSafeInteger(appliedVersion) || appliedVersion < 0 || appliedVersion > MAX_VERSION) {
    throw new MeshpError('MESHP_USAGE', `applied version ${appliedVersion} is not a version a controller sends`);
  }
}

function summary(delta: StateDelta, expectedHash: string, at: string): SentSummary {
  const components = (['dns', 'filter', 'routeGroups', 'relays', 'tunnel', 'declaration'] as const).filter((n) => delta[n] !== undefined);
  return { fromVersion: delta.fromVersion, toVersion: delta.toVersion, upserts: delta.upsertPeers.length, removals: delta.removePeers.length, components, expectedHash, at };
}

/**
 * The delta protocol's server side for one membership: what to send it next, and what its acks
 * and hellos mean for its sync record. These functions change the record in place; persisting it
 * is the caller's (the controller, in one store transaction).
 */
import { malformed } from '../../conditions.js';
import { componentDigest, loadDigest, stateHash, storeDigest, type ViewDigest } from '../hash.js';
import { declarationForRevision, dnsForRevision, relaysForRevision, routeGroupsForRevision } from '../revision.js';
import { relaysFor } from './relays.js';
import { dnsFor } from './dns.js';
import { PROTOCOL_REVISION } from '../../contract/transport.js';
import { COMPONENT_NAMES, REMOVAL_REASON, type StateDelta } from '../../contract/wire.js';
import { declarationFor } from './components.js';
import { computeIncremental, computeSnapshot, routeGroupsNow, type Computed } from './compute.js';
import type { NetworkState } from './network.js';
import type { Expectation, SentSummary, SyncRecord } from './records.js';

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
 * Lazy fan-out: what the versions since the basis did to the node's view. 'same': nothing (the
 * basis moves to the network's version, nothing is sent or written); a delta from the basis,
 * relabelled to start at `sent` (the view at the basis is the one at `sent`); null: the log does not
 * reach back, or the expected view at `sent` is unknown — a snapshot.
 */
function pending(net: NetworkState, id: string, sync: SyncRecord): Computed | 'same' | null {
  const basis = Math.max(sync.basis ?? sync.sent, sync.sent);
  const base = sync.expectations.find((e) => e.version === sync.sent);
  if (!base) return null;
  if (basis === net.version) return same(sync);
  // No change since the basis concerned the node (noted as each was made: `noteChange`): the view
  // is the one sent, without a walk of the log — a gap read of a quiet node costs O(1).
  if (basis < net.version && net.touchedAt(id) <= basis) {
    sync.basis = net.version;
    return same(sync);
  }
  const computed = computeIncremental(net, id, basis, loadDigest(base.digest), new Set(sync.graced ?? []));
  if (!computed) {
    // The log no longer reaches the basis: a node no change concerned for that long (the fan-out
    // pumps only the nodes concerned) still has the view it was sent, and needs nothing then.
    if (!net.members.has(id)) return null;
    const now = computeSnapshot(net, id);
    if (stateHash(now.digest) !== stateHash(loadDigest(base.digest))) return null;
    sync.basis = net.version;
    return same(sync);
  }
  const d = computed.delta;
  if (d.upsertPeers.length === 0 && d.removePeers.length === 0 && !COMPONENT_NAMES.some((n) => d[n] !== undefined)) {
    sync.basis = net.version;
    return same(sync);
  }
  return { ...computed, delta: { ...d, fromVersion: sync.sent } };
}

/**
 * The view's hashes for one agent-delta, each computed once (issue 31): `hash`, the one the node's
 * revision expects; `alt`, the hash over every field (the same string at the current revision).
 */
function viewHashes(net: NetworkState, id: string, digest: ViewDigest, revision: number): { hash: string; alt: string } {
  const alt = stateHash(digest);
  return { hash: revision >= PROTOCOL_REVISION ? alt : hashForRevision(net, id, digest, revision), alt };
}

/** The hash an agent of `revision` computes for this view: over the fields its decoder knows (core delta/revision.ts). */
export function hashForRevision(net: NetworkState, id: string, digest: ViewDigest, revision: number): string {
  const self = net.members.get(id);
  if (revision >= PROTOCOL_REVISION || !self) return stateHash(digest);
  const components = { ...digest.components };
  if (components.declaration !== null) components.declaration = componentDigest(declarationForRevision(declarationFor(self, net.moduleOf), revision));
  if (components.dns !== null) components.dns = componentDigest(dnsForRevision(dnsFor(net), revision));
  if (components.relays !== null) components.relays = componentDigest(relaysForRevision(relaysFor(self, net.record.components.relays), revision));
  if (components.routeGroups !== null && revision < 5) components.routeGroups = componentDigest(routeGroupsForRevision(routeGroupsNow(net, self), revision));
  return stateHash({ ...digest, components });
}

/**
 * The scope rule views are computed with now. 2: the control-node is in every member's view and
 * every member in the control-node's, whatever the policy (policy.ts CONTROL_NODE_TAG). 3: the DNS
 * component carries the domain in force and the foundation names (dns.ts, issue 25).
 */
export const SCOPE_RULE = 3;

/**
 * A network whose views were computed under an older scope rule, loaded by this controller: no log
 * entry made the difference, so no delta can carry it. Each membership's view as sent is compared
 * once with the one the rule computes now; one that differs gets a snapshot (the agent then has what
 * the controller would send a new member), one that does not is left alone. Returns the ids whose
 * sync record changed; the caller persists them with the record, whose `scopeRule` is now current.
 */
export function rescope(net: NetworkState): string[] {
  const changed: string[] = [];
  for (const [id, sync] of net.sync) {
    if (!net.members.has(id) || sync.sent === 0 || sync.snapshotPending) continue;
    const base = sync.expectations.find((e) => e.version === sync.sent);
    if (base && stateHash(loadDigest(base.digest)) === stateHash(computeSnapshot(net, id).digest)) continue;
    sync.snapshotPending = true;
    sync.snapshotNotBefore = 0;
    sync.target = net.version;
    changed.push(id);
  }
  net.record.scopeRule = SCOPE_RULE;
  return changed;
}

/**
 * The changes of versions (from, to] may have moved the views of `ids` (scope.ts `affectedBy`;
 * null: of every member), noted as they are made, in order. A node among them that no earlier change
 * concerned since its basis has, at `from`, the view it was sent: its basis moves there, so the delta
 * it is sent is built from the log since `from`, however long it was quiet. The nodes not among them
 * are not looked at (O(k) for a change that concerns k nodes, whatever the size of the network):
 * `pending` finds them untouched since their basis when it is read.
 */
export function noteChange(net: NetworkState, from: number, to: number, ids: Iterable<string> | null): void {
  const list = ids === null ? null : [...ids];
  for (const id of list ?? []) {
    const sync = net.sync.get(id);
    if (!sync) continue;
    const basis = Math.max(sync.basis ?? sync.sent, sync.sent);
    if (basis < from && net.touchedAt(id) <= basis) sync.basis = from;
  }
  net.touch(to, list);
}

/** The view is the one sent: nothing to catch up on (a change undone since is no change). */
function same(sync: SyncRecord): 'same' {
  sync.target = sync.sent;
  return 'same';
}

/**
 * Brings `target` up to date without sending: a node whose view changed since the basis has the
 * network's version as its target (the gap then says it is behind); one whose view did not, none.
 */
export function refreshTarget(net: NetworkState, id: string, sync: SyncRecord): void {
  if (sync.snapshotPending || sync.sent === 0) return;
  const p = pending(net, id, sync);
  if (p !== 'same') sync.target = net.version;
}

/**
 * What to send the node now: a delta from where it will be once it applied what it was sent, or a
 * snapshot when that is unknown, not reachable through the log, or its hash was wrong. Null: nothing
 * to send — also when the versions since did not change the node's view (lazy fan-out).
 */
export function nextDelta(net: NetworkState, id: string, sync: SyncRecord, at: string, keepSent: number): StateDelta | null {
  if (sync.diverged && !healByChange(net, id, sync)) return null;
  if (sync.snapshotPending && (sync.snapshotNotBefore ?? 0) > Date.parse(at)) return null;
  if (sync.sent === net.version && !sync.snapshotPending) return null;
  const p = sync.snapshotPending ? null : pending(net, id, sync);
  if (p === 'same') return null;
  const computed: Computed = p ?? computeSnapshot(net, id);
  // Agents built between releases said revision 1 and knew some later fields: the hash over every field is accepted too.
  const { hash, alt } = viewHashes(net, id, computed.digest, sync.revision ?? PROTOCOL_REVISION);
  computed.delta.stateHash = hash;
  sync.snapshotPending = false;
  sync.sent = net.version;
  sync.basis = net.version;
  sync.target = net.version;
  sync.expectations = [...sync.expectations.filter((e) => e.version !== net.version), expectation(net.version, hash, alt, computed.digest)]
    .filter((e) => e.version >= sync.applied)
    .slice(-EXPECTATIONS);
  sync.recent = [...sync.recent, summary(computed.delta, hash, at)].slice(-keepSent);
  trackGraced(net, id, sync, computed.delta);
  return computed.delta;
}

/**
 * A diverged membership gets one snapshot again when its view changes (the operator's change may be
 * what the agent could not apply, or the agent was mended meanwhile): the change, not the client,
 * decides, so a client still cannot make snapshots come. `mismatches` stays past the bound, so a
 * snapshot applied with another hash again diverges at once; one applied with the hash expected heals.
 */
function healByChange(net: NetworkState, id: string, sync: SyncRecord): boolean {
  if (sync.sent === net.version || pending(net, id, sync) === 'same') return false;
  delete sync.diverged;
  sync.snapshotPending = true;
  sync.snapshotNotBefore = 0;
  return true;
}

/** Peers kept per membership as possibly in grace; the oldest go first (a REMOVED then finds the grace run out). */
const GRACED = 4096;

/** Who the node may hold in a tunnel grace period after this delta (see SyncRecord.graced). */
function trackGraced(net: NetworkState, id: string, sync: SyncRecord, d: StateDelta): void {
  const graced = new Set(sync.graced ?? []);
  for (const r of d.removePeers) {
    graced.delete(r.id);
    if (r.reason === REMOVAL_REASON.UNSCOPED) {
      graced.add(r.id);
      net.sync.graced(r.id, id);
    }
  }
  for (const p of d.upsertPeers) graced.delete(p.id);
  if (graced.size === 0) delete sync.graced;
  else sync.graced = [...graced].slice(-GRACED);
}

export interface ResyncBounds {
  /** The wait before the second snapshot asked for in a row; doubled for each after. */
  baseMs: number;
  /** Snapshots in a row after which the membership is marked diverged and none is sent. */
  max: number;
}

export const DEFAULT_RESYNC_BOUNDS: ResyncBounds = { baseMs: 1_000, max: 4 };

/**
 * A snapshot was asked for (a hash that differed, a resync): the first at once, each next one in a
 * row after an exponentially longer wait, none after `max` — the membership is then diverged, with
 * a coded reason, and keeps its last good view until an ack or a hello matches again.
 */
export function snapshotAsked(sync: SyncRecord, nowMs: number, bounds: ResyncBounds, why: string): void {
  if (sync.diverged) return;
  const n = (sync.mismatches ?? 0) + 1;
  sync.mismatches = n;
  if (n > bounds.max) {
    sync.diverged = `MESHP_DIVERGED: ${n - 1} snapshots in a row were not applied with the hash expected (last: ${why})`;
    sync.snapshotPending = false;
    return;
  }
  sync.snapshotPending = true;
  sync.snapshotNotBefore = n <= 1 ? 0 : nowMs + bounds.baseMs * 2 ** (n - 2);
}

/** Only an ack whose hash matches the one computed for its version moves the applied version. */
export function takeAck(sync: SyncRecord, appliedVersion: number, hash: string): AckResult {
  sync.lastAgentHash = hash;
  const expected = sync.expectations.find((e) => e.version === appliedVersion);
  let accepted = false;
  if (expected && (expected.hash === hash || expected.alt === hash)) {
    accepted = true;
    sync.mismatches = 0;
    sync.snapshotNotBefore = 0;
    delete sync.diverged;
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
    // The basis holds for the version sent; an agent back at another version starts from its own.
    if (appliedVersion !== sync.sent) sync.basis = appliedVersion;
    sync.sent = appliedVersion;
    sync.snapshotPending = !sync.expectations.some((e) => e.version === appliedVersion);
  } else sync.snapshotPending = true;
  return { accepted: result.accepted, snapshotPending: sync.snapshotPending };
}

/**
 * A hello at a version this controller keeps no expectation for, because its record of what it sent
 * was not written yet when it stopped (sync records are group-committed: see `Controller`): the
 * agent's hash is checked against the node's view now. The same hash means the agent holds the
 * current view, whatever version it names; that version is then expected, as if its ack had been
 * kept (true), and the caller moves the basis to the network's version. Another hash: nothing is
 * added, and a snapshot follows as before.
 */
/**
 * An expectation, frozen with its digest: the list is replaced whole, never an entry changed in place,
 * so the committed image keeps the entries a record names without a deep copy (committed.ts putSync).
 */
function expectation(version: number, hash: string, alt: string, digest: ViewDigest): Expectation {
  const d = storeDigest(digest);
  Object.freeze(d.components);
  return Object.freeze({ version, hash, ...(alt !== hash ? { alt } : {}), digest: Object.freeze(d) });
}

export function recoverExpectation(net: NetworkState, id: string, sync: SyncRecord, appliedVersion: number, hash: string): boolean {
  if (appliedVersion <= 0 || appliedVersion > net.version || !hash) return false;
  if (sync.expectations.some((e) => e.version === appliedVersion)) return false;
  const c = computeSnapshot(net, id);
  const { hash: expected, alt } = viewHashes(net, id, c.digest, sync.revision ?? PROTOCOL_REVISION);
  if (hash !== expected && hash !== alt) return false;
  sync.expectations = [...sync.expectations, expectation(appliedVersion, expected, alt, c.digest)].sort((a, b) => a.version - b.version).slice(-EXPECTATIONS);
  return true;
}

/** A hello's version must be one a controller could have sent: any other is a malformed hello, not a usage error. */
export function checkAppliedVersion(appliedVersion: number): void {
  if (!Number.isSafeInteger(appliedVersion) || appliedVersion < 0 || appliedVersion > MAX_VERSION) {
    throw malformed(`applied version ${appliedVersion} is not a version a controller sends`);
  }
}

function summary(delta: StateDelta, expectedHash: string, at: string): SentSummary {
  const components = (['dns', 'filter', 'routeGroups', 'relays', 'tunnel', 'declaration'] as const).filter((n) => delta[n] !== undefined);
  return {
    fromVersion: delta.fromVersion,
    toVersion: delta.toVersion,
    upserts: delta.upsertPeers.length,
    removals: delta.removePeers.length,
    components,
    expectedHash,
    at,
  };
}

/**
 * The delta protocol's server side, without a transport: what a node is sent (`deltaFor`), and
 * its hello, acks, resync requests and reports taken. The records it changes are written by the
 * group commit (group-commit.ts); the protocol's rules are core's (sync.ts).
 */
import { MeshpError, type StateDelta } from '@meshp/core';
import {
  affectedBy,
  checkAppliedVersion,
  computeSnapshot,
  nextDelta,
  recoverExpectation,
  snapshotAsked,
  stateHash,
  takeAck,
  takeHello,
  versionPayload,
  type AckResult,
  type ReportedHandshakes,
  type ReportedState,
  type SyncRecord,
} from '@meshp/core/delta';
import { moveAhead } from './log.js';
import { putSync } from './group-commit.js';
import { dirtyKey, type ControllerState } from './state.js';

export function deltaFor(s: ControllerState, network: string, id: string): StateDelta | null {
  const net = s.net(network);
  s.member(net, id);
  const sync = s.sync(net, id);
  const delta = nextDelta(net, id, sync, s.now(), s.keepSent);
  if (!delta) return null;
  putSync(s, net, id, sync);
  delta.versionSignature = s.signer ? s.signer.sign(versionPayload(network, delta.toVersion, delta.stateHash ?? '')) : new Uint8Array(0);
  return delta;
}

export function affectedSince(s: ControllerState, network: string, since: number): Set<string> | null {
  const net = s.net(network);
  const entries = net.since(since);
  return entries ? affectedBy(net, entries) : null;
}

export function snapshotOf(s: ControllerState, network: string, id: string): { delta: StateDelta; hash: string } {
  const c = computeSnapshot(s.net(network), id);
  return { delta: c.delta, hash: stateHash(c.digest) };
}

export function ack(s: ControllerState, network: string, id: string, appliedVersion: number, hash: string): AckResult {
  const net = s.net(network);
  const sync = s.sync(net, id);
  const result = takeAck(sync, appliedVersion, hash);
  // An agent acks a version once it reconciled it, and reports before the ack only when its host's
  // facts changed: its last report stands for the version acked (an older agent reports again anyway).
  if (result.accepted && sync.reported && appliedVersion > sync.reported.version) sync.reported = { ...sync.reported, version: appliedVersion };
  if (!result.accepted && result.snapshotPending) snapshotAsked(sync, Date.parse(s.now()), s.resync, `ack of version ${appliedVersion} with another hash`);
  putSync(s, net, id, sync);
  return { ...result, snapshotPending: sync.snapshotPending };
}

/**
 * When a snapshot held back by the backoff may go (epoch ms), or null; and why none goes at all.
 * A pending snapshot always has a time, even one already past: `deltaFor` read the clock a moment
 * before, and a hold that ran out in between (a timer fires up to a millisecond early; a busy
 * machine stretches the moment) must still be pumped again, never left without a timer.
 */
export function snapshotHold(s: ControllerState, network: string, id: string): { retryAt: number | null; diverged: string | null } {
  const sync = s.sync(s.net(network), id);
  const at = sync.snapshotPending && !sync.diverged ? Math.max(sync.snapshotNotBefore ?? 0, Date.parse(s.now())) : null;
  return { retryAt: at, diverged: sync.diverged ?? null };
}

/**
 * A new stream: resume from the agent's own version when its hash is the one expected, else
 * snapshot. An agent that applied a version this controller never reached means the controller
 * runs on an older copy of its state (restored from a backup): the versions after that copy,
 * which agents saw, belong to a history it no longer has. The network's version then moves past
 * the agent's and the change log is emptied — no delta bridges two histories — so this agent,
 * and every other as it asks, gets a snapshot newer than anything it holds (an agent never
 * goes back to an older version).
 */
/** A node's sync record as a store across the network holds it (none: `record` undefined), read before its hello. */
export interface StoredSync {
  record: SyncRecord | undefined;
}

export function hello(
  s: ControllerState,
  network: string,
  id: string,
  appliedVersion: number,
  hash: string,
  versionSignature?: Uint8Array,
  revision?: number,
  given?: StoredSync,
): AckResult {
  const net = s.net(network);
  // A shared store: the node's stream may have been on another controller, whose record is the one
  // written; this one's is kept when it is as far (its stream was here: its basis may be further).
  const stored = s.dirty.has(dirtyKey(network, id)) ? undefined : given ? given.record : s.store.syncRecord?.(network, id);
  const mine = net.sync.get(id);
  if (stored && (!mine || stored.sent > mine.sent || stored.applied > mine.applied)) net.sync.set(id, stored);
  const sync = s.sync(net, id);
  if (revision !== undefined && revision > 0) sync.revision = revision;
  checkAppliedVersion(appliedVersion);
  if (
    appliedVersion > net.version &&
    s.signer &&
    !(versionSignature?.length && s.signer.verify(versionPayload(network, appliedVersion, hash), versionSignature))
  ) {
    throw new MeshpError(
      'MESHP_VERSION_UNPROVEN',
      `${id} claims version ${appliedVersion} of ${network} (at ${net.version} here) without this controller's signature for it`,
    );
  }
  const movedAhead = appliedVersion > net.version ? moveAhead(s, net, appliedVersion) : undefined;
  // Its ack lost in a restart (group commit): the hello says it again, checked against the view now.
  const recovered = !movedAhead && recoverExpectation(net, id, sync, appliedVersion, hash);
  const result = takeHello(sync, appliedVersion, hash);
  if (recovered && result.accepted) sync.basis = net.version;
  if (!result.accepted && result.snapshotPending) snapshotAsked(sync, Date.parse(s.now()), s.resync, `hello at version ${appliedVersion} with another hash`);
  putSync(s, net, id, sync);
  return movedAhead ? { ...result, movedAhead } : result;
}

export function resync(s: ControllerState, network: string, id: string): void {
  const net = s.net(network);
  const sync = s.sync(net, id);
  snapshotAsked(sync, Date.parse(s.now()), s.resync, 'the agent asked for a snapshot');
  putSync(s, net, id, sync);
}

export function report(
  s: ControllerState,
  network: string,
  id: string,
  r: { firewallKind?: string; held?: number; changed?: number; reported?: ReportedState },
): void {
  const net = s.net(network);
  const sync = s.sync(net, id);
  Object.assign(sync, {
    firewallKind: r.firewallKind ?? sync.firewallKind,
    held: r.held ?? sync.held,
    changed: r.changed ?? sync.changed,
    ...(r.reported ? { reported: r.reported } : {}),
  });
  putSync(s, net, id, sync);
}

export function reportedHandshakes(s: ControllerState, network: string, id: string): ReportedHandshakes | undefined {
  return s.net(network).sync.get(id)?.reported?.handshakes;
}

/** A shared store: the sync records of the nodes whose streams are elsewhere, as their controller last wrote them. */
export function reloadSync(s: ControllerState, network: string, here: (id: string) => boolean): void {
  const net = s.net(network);
  const ids = [...net.members.keys()].filter((id) => !here(id) && !s.dirty.has(dirtyKey(network, id)));
  if (ids.length === 0 || !s.store.syncRecords) return;
  for (const [id, r] of s.store.syncRecords(network, ids)) if (net.members.has(id)) net.sync.set(id, r);
}

/** `reloadSync` without the event loop waiting on the store (a store across the network). */
export async function reloadSyncAsync(s: ControllerState, network: string, here: (id: string) => boolean): Promise<void> {
  if (!s.store.syncRecordsAsync) return reloadSync(s, network, here);
  const net = s.net(network);
  const ids = [...net.members.keys()].filter((id) => !here(id) && !s.dirty.has(dirtyKey(network, id)));
  if (ids.length === 0) return;
  const got = await s.store.syncRecordsAsync(network, ids);
  // The network as it is now (a change may have come meanwhile); a record that went dirty meanwhile is this controller's.
  const now = s.networks.get(network);
  if (!now) return;
  for (const [id, r] of got) if (now.members.has(id) && !s.dirty.has(dirtyKey(network, id))) now.sync.set(id, r);
}

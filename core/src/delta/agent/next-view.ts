import type { ViewChange } from '../../contract/plan.js';
import { MeshpError } from '../../errors.js';
import { addPeer, cloneDigest, componentDigest, emptyDigest, peerDigest, removePeer } from '../hash.js';
import { DEFAULT_LIMITS, validateDelta, type DeltaLimits } from '../validate.js';
import { AgentView } from './view.js';
import { COMPONENT_NAMES, REMOVAL_REASON, type Components, type Peer, type StateDelta } from '../../contract/wire.js';

interface Entry {
  peer: Peer;
  digest: bigint;
}

/**
 * Applies one delta to the view, or refuses it and changes nothing.
 *
 * - from_version 0 (a snapshot) replaces the view; peers it drops are reported `removed`, since a
 *   snapshot cannot say why a peer is gone and keeping a tunnel to a departed peer is the unsafe side.
 * - otherwise from_version must equal the view's version (MESHP_DELTA_GAP), removals are applied
 *   before upserts, and the change is staged in an overlay committed only once all of it is checked:
 *   the cost is that of the change, never that of the view.
 */
export function applyDelta(view: AgentView, delta: StateDelta, limits: DeltaLimits = DEFAULT_LIMITS): ViewChange {
  validateDelta(delta, limits);
  return delta.fromVersion === 0 ? applySnapshot(view, delta, limits) : applyIncrement(view, delta, limits);
}

function applyIncrement(view: AgentView, delta: StateDelta, limits: DeltaLimits): ViewChange {
  if (delta.fromVersion !== view.version) {
    throw new MeshpError('MESHP_DELTA_GAP', `delta ${delta.fromVersion}→${delta.toVersion} does not follow applied version ${view.version}`, {
      details: { from: delta.fromVersion, to: delta.toVersion, applied: view.version },
    });
  }
  if (view.network !== '' && delta.network !== '' && delta.network !== view.network) {
    throw new MeshpError('MESHP_DELTA_INVALID', `delta for network ${delta.network} reached a view of ${view.network}`);
  }
  const staged = new Map<string, Entry | null>();
  const digest = cloneDigest(view.digest);
  const change: ViewChange = { fromVersion: delta.fromVersion, toVersion: delta.toVersion, upserted: [], removed: [], unscoped: [], components: [] };
  const current = (id: string): Entry | null | undefined => (staged.has(id) ? staged.get(id) : view.peers.get(id));

  for (const r of delta.removePeers) {
    const had = current(r.id);
    if (!had) {
      // A peer unscoped earlier and now gone: outside the view (no hash moves), but a tunnel may hold it in grace.
      if (r.reason === REMOVAL_REASON.REMOVED) change.removed.push(r.id);
      continue;
    }
    removePeer(digest, had.digest);
    staged.set(r.id, null);
    (r.reason === REMOVAL_REASON.REMOVED ? change.removed : change.unscoped).push(r.id);
  }
  for (const p of delta.upsertPeers) {
    const entry: Entry = { peer: copyPeer(p), digest: peerDigest(p) };
    const had = current(p.id);
    if (had) removePeer(digest, had.digest);
    addPeer(digest, entry.digest);
    staged.set(p.id, entry);
    if (!had || had.digest !== entry.digest) change.upserted.push(p.id);
  }
  if (digest.peerCount > limits.maxPeers) {
    throw new MeshpError('MESHP_DELTA_INVALID', `the view would hold ${digest.peerCount} peers, more than ${limits.maxPeers}`);
  }
  const components = stageComponents(view.components, delta, digest, change);

  // Commit: nothing below can fail.
  for (const [id, e] of staged) {
    if (e) view.peers.set(id, e);
    else view.peers.delete(id);
  }
  view.components = components;
  view.digest = digest;
  view.version = delta.toVersion;
  if (delta.network !== '') view.network = delta.network;
  return change;
}

function applySnapshot(view: AgentView, delta: StateDelta, limits: DeltaLimits): ViewChange {
  if (delta.upsertPeers.length > limits.maxPeers) {
    throw new MeshpError('MESHP_DELTA_INVALID', `the snapshot holds ${delta.upsertPeers.length} peers, more than ${limits.maxPeers}`);
  }
  const peers = new Map<string, Entry>();
  const digest = emptyDigest();
  const change: ViewChange = { fromVersion: 0, toVersion: delta.toVersion, upserted: [], removed: [], unscoped: [], components: [] };
  for (const p of delta.upsertPeers) {
    const entry: Entry = { peer: copyPeer(p), digest: peerDigest(p) };
    peers.set(p.id, entry);
    addPeer(digest, entry.digest);
    const had = view.peers.get(p.id);
    if (!had || had.digest !== entry.digest) change.upserted.push(p.id);
  }
  for (const id of view.peers.keys()) if (!peers.has(id)) change.removed.push(id);
  const components: Components = {};
  for (const name of COMPONENT_NAMES) {
    const value = delta[name];
    const d = componentDigest(value);
    digest.components[name] = d;
    if (value !== undefined) Object.assign(components, { [name]: structuredClone(value) });
    if (d !== view.digest.components[name]) change.components.push(name);
  }
  view.peers.clear();
  for (const [id, e] of peers) view.peers.set(id, e);
  view.components = components;
  view.digest = digest;
  view.version = delta.toVersion;
  view.network = delta.network;
  return change;
}

function stageComponents(before: Components, delta: StateDelta, digest: ReturnType<typeof cloneDigest>, change: ViewChange): Components {
  const next: Components = { ...before };
  for (const name of COMPONENT_NAMES) {
    const value = delta[name];
    if (value === undefined) continue;
    const d = componentDigest(value);
    if (d !== digest.components[name]) change.components.push(name);
    digest.components[name] = d;
    Object.assign(next, { [name]: structuredClone(value) });
  }
  return next;
}

function copyPeer(p: Peer): Peer {
  return {
    id: p.id,
    nodeKey: p.nodeKey,
    addresses: [...p.addresses],
    tags: [...p.tags],
    endpoints: [...p.endpoints],
    inboundOnly: p.inboundOnly === true,
    ...(p.tunnelKey ? { tunnelKey: p.tunnelKey } : {}),
  };
}

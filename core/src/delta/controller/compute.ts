import { addPeer, cloneDigest, componentDigest, emptyDigest, removePeer, setComponents, type ViewDigest } from '../hash.js';
import { REMOVAL_REASON, emptyDelta, type ComponentName, type Components, type Peer, type PeerRemoval, type StateDelta } from '../../contract/wire.js';
import { componentsFor, declarationFor, filterFor, sharedPeer, tunnelFor } from './components.js';
import type { NetworkState } from './network.js';
import { dnsFor } from './dns.js';
import { relaysFor } from './relays.js';
import { PolicyIndex, SCOPE, isControlNode } from './policy.js';
import { routeGroupsFor, routePeersOf, scoperOf, servedRouteTags, type Scoper } from './routes.js';
import type { LogEntry, MemberRecord, ModuleDef, PolicyRule, SharedComponentName } from './records.js';
import type { RouteGroup, RouteGroups } from '../../contract/wire.js';

export interface Computed {
  delta: StateDelta;
  /** The digest of the node's view once the delta is applied. */
  digest: ViewDigest;
}

const NONE: ReadonlySet<string> = new Set();

const byId = (a: { id: string }, b: { id: string }): number => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** The node's whole view at the network's current version (from_version 0). */
export function computeSnapshot(net: NetworkState, nodeId: string): Computed {
  const self = net.members.get(nodeId);
  if (!self) throw new Error(`no member ${nodeId}`);
  // A control-node sees every member (policy.ts: CONTROL_NODE_TAG), tagged or not.
  const ids = isControlNode(self.tags) ? new Set(net.members.keys()) : new Set<string>();
  for (const t of net.policy.reachTags(self.tags)) for (const id of net.tags.members(t)) ids.add(id);
  for (const t of net.policy.reachedByTags(self.tags)) for (const id of net.tags.members(t)) ids.add(id);
  const groups = groupsOf(net.record.components.routeGroups);
  routePeersOf(self, net.policy, groups, (t) => net.tags.members(t), ids);
  const scopeOf = scoperOf(net.policy, groups);
  const peers: Peer[] = [];
  // Each peer's image and digest are the member's, shared by every view that holds it (sharedPeer).
  const digest = emptyDigest();
  for (const id of ids) {
    const m = net.members.get(id);
    if (!m) continue;
    const scope = scopeOf(self, m);
    if (scope === SCOPE.NONE) continue;
    const e = sharedPeer(m, scope);
    peers.push(e.peer);
    addPeer(digest, e.digest);
  }
  peers.sort(byId);
  const components = componentsFor({
    node: self,
    policy: net.policy,
    shared: net.record.components,
    dns: dnsFor(net),
    routeGroups: routeGroupsNow(net, self),
    servedRoutes: servedRouteTags(self, groups),
    moduleOf: net.moduleOf,
    privateRange: net.record.privateRange,
  });
  const delta: StateDelta = { ...emptyDelta(net.record.name, 0, net.version), upsertPeers: peers, ...components };
  setComponents(digest, components);
  return { delta, digest };
}

/** What the log since a version says was there before it changed: each thing's first "before" wins. */
interface Before {
  members: Map<string, MemberRecord | null>;
  shared: Map<SharedComponentName, unknown>;
  modules: Map<string, ModuleDef | null>;
  policy: PolicyIndex | undefined;
}

function valuesBefore(entries: LogEntry[]): Before {
  const members = new Map<string, MemberRecord | null>();
  const shared = new Map<SharedComponentName, unknown>();
  const modules = new Map<string, ModuleDef | null>();
  let policy: PolicyIndex | undefined;
  for (const e of entries) {
    if (e.kind === 'members') {
      for (const c of e.changes) if (!members.has(c.id)) members.set(c.id, c.before);
    } else if (e.kind === 'member' && !members.has(e.id)) members.set(e.id, e.before);
    else if (e.kind === 'policy' && !policy) policy = policyBefore(e.before);
    else if (e.kind === 'component' && !shared.has(e.name)) shared.set(e.name, e.before);
    else if (e.kind === 'module' && !modules.has(e.name)) modules.set(e.name, e.before);
  }
  return { members, shared, modules, policy };
}

/** The node then and now, and the policy then and now, as one incremental computation sees them. */
interface Sides {
  net: NetworkState;
  nodeId: string;
  before: Before;
  selfThen: MemberRecord;
  selfNow: MemberRecord;
  polThen: PolicyIndex;
  polNow: PolicyIndex;
  /** The policy changed or the node's own tags did: its filter and its reach are computed anew. */
  reachMoved: boolean;
  groupsThen: readonly RouteGroup[];
  groupsNow: readonly RouteGroup[];
  scopeThen: Scoper;
  scopeNow: Scoper;
}

/** The members whose scope may have moved: those that changed, and the holders of tags whose reachability moved. */
function candidatesOf(s: Sides): Set<string> {
  const { net, selfThen, selfNow, polThen, polNow } = s;
  const candidates = new Set(s.before.members.keys());
  if (s.reachMoved) {
    const moved = new Set<string>();
    symmetric(polThen.reachTags(selfThen.tags), polNow.reachTags(selfNow.tags), moved);
    symmetric(polThen.reachedByTags(selfThen.tags), polNow.reachedByTags(selfNow.tags), moved);
    for (const t of moved) for (const id of net.tags.members(t)) candidates.add(id);
    // The node became, or stopped being, a control-node: every member's scope may have moved.
    if (isControlNode(selfThen.tags) !== isControlNode(selfNow.tags)) for (const id of net.members.keys()) candidates.add(id);
  }
  // The route groups widen the view (routes.ts): when they or the reach moved, their peers then and now are candidates.
  if (s.reachMoved || s.before.shared.has('routeGroups')) {
    const holders = (t: string) => net.tags.members(t);
    routePeersOf(selfThen, polThen, s.groupsThen, holders, candidates);
    routePeersOf(selfNow, polNow, s.groupsNow, holders, candidates);
  }
  candidates.delete(s.nodeId);
  return candidates;
}

/** Each candidate's image then and now: the peers to upsert and to remove, the digest moved with them. */
function peerChanges(s: Sides, candidates: Set<string>, digest: ViewDigest, graced: ReadonlySet<string>): { upsertPeers: Peer[]; removePeers: PeerRemoval[] } {
  const { net, before, selfThen, selfNow, scopeThen, scopeNow } = s;
  const at = (id: string): MemberRecord | null => (before.members.has(id) ? before.members.get(id)! : (net.members.get(id) ?? null));
  const upsertPeers: Peer[] = [];
  const removePeers: PeerRemoval[] = [];
  for (const id of candidates) {
    const then = at(id);
    const now = net.members.get(id) ?? null;
    const sThen = then ? scopeThen(selfThen, then) : SCOPE.NONE;
    const sNow = now ? scopeNow(selfNow, now) : SCOPE.NONE;
    const dThen = then && sThen !== SCOPE.NONE ? sharedPeer(then, sThen).digest : null;
    if (!now || sNow === SCOPE.NONE) {
      // Out of the view already, but perhaps still held in the node's tunnel grace: it is told the peer left.
      if (dThen === null && !now && then && graced.has(id)) removePeers.push({ id, reason: REMOVAL_REASON.REMOVED });
      if (dThen === null) continue;
      removePeer(digest, dThen);
      // An expired peer is removed for traffic (ADR 0041): its allowed IPs go at once, no unscoping grace keeps them.
      removePeers.push({ id, reason: now && !now.expiredAt ? REMOVAL_REASON.UNSCOPED : REMOVAL_REASON.REMOVED });
      continue;
    }
    const { peer: img, digest: dNow } = sharedPeer(now, sNow);
    if (dThen === dNow) continue;
    if (dThen !== null) removePeer(digest, dThen);
    addPeer(digest, dNow);
    upsertPeers.push(img);
  }
  upsertPeers.sort(byId);
  removePeers.sort(byId);
  return { upsertPeers, removePeers };
}

/** The components the log says may have changed for the node, computed as they are now. */
function componentsMoved(s: Sides): Components {
  const { net, nodeId, before, selfThen, selfNow } = s;
  const changed: Components = {};
  if (before.shared.has('dns')) changed.dns = dnsFor(net);
  // Each node's own credentials (relays.ts); a node that gained or lost its tunnel key too.
  if (before.shared.has('relays') || before.members.has(nodeId)) changed.relays = relaysFor(selfNow, net.record.components.relays);
  // A node's route groups follow its policy and the groups' via members: computed whenever there are any (the digest drops an unchanged one).
  if (s.groupsNow.length || s.groupsThen.length) changed.routeGroups = routeGroupsNow(net, selfNow);
  // The foundation names are the control-nodes' addresses: a control-node that changed may have moved them.
  if (!changed.dns && controlNodeMoved(net, before)) changed.dns = dnsFor(net);
  if (s.reachMoved || before.shared.has('routeGroups')) changed.filter = filterFor(selfNow, s.polNow, servedRouteTags(selfNow, s.groupsNow));
  if (before.members.has(nodeId)) changed.tunnel = tunnelFor(selfNow, net.record.privateRange);
  const modulesMoved = [...before.modules.keys()].some((m) => selfThen.assigned.includes(m) || selfNow.assigned.includes(m));
  if (before.members.has(nodeId) || modulesMoved) changed.declaration = declarationFor(selfNow, net.moduleOf);
  return changed;
}

/** Only the components whose digest differs go into the delta; the digest follows them. */
function addComponents(delta: StateDelta, digest: ViewDigest, changed: Components): void {
  for (const [name, value] of Object.entries(changed) as [ComponentName, Components[ComponentName]][]) {
    const d = componentDigest(value);
    if (d === digest.components[name]) continue;
    digest.components[name] = d;
    Object.assign(delta, { [name]: value });
  }
}

/**
 * The delta from version `a` (whose view digest is `base`) to the current version, built from the
 * change log since `a`: only the peers that changed are scope-checked, plus — when the policy or the
 * node's own tags changed — the holders of the tags whose reachability moved (through the tag index).
 * Null when the log does not reach back to `a` or the node did not exist at `a`: send a snapshot.
 */
export function computeIncremental(net: NetworkState, nodeId: string, a: number, base: ViewDigest, graced: ReadonlySet<string> = NONE): Computed | null {
  const entries = net.since(a);
  const selfNow = net.members.get(nodeId);
  if (!entries || !selfNow) return null;
  const before = valuesBefore(entries);
  const selfThen = before.members.has(nodeId) ? before.members.get(nodeId)! : selfNow;
  if (!selfThen) return null;
  const reachMoved = before.policy !== undefined || !sameList(selfThen.tags, selfNow.tags);
  const polThen = before.policy ?? net.policy;
  const groupsNow = groupsOf(net.record.components.routeGroups);
  const groupsThen = before.shared.has('routeGroups') ? groupsOf(before.shared.get('routeGroups') as RouteGroups | undefined) : groupsNow;
  const sides: Sides = {
    net,
    nodeId,
    before,
    selfThen,
    selfNow,
    polThen,
    polNow: net.policy,
    reachMoved,
    groupsThen,
    groupsNow,
    scopeThen: scoperOf(polThen, groupsThen),
    scopeNow: scoperOf(net.policy, groupsNow),
  };

  const digest = cloneDigest(base);
  const { upsertPeers, removePeers } = peerChanges(sides, candidatesOf(sides), digest, graced);
  const delta: StateDelta = { ...emptyDelta(net.record.name, a, net.version), upsertPeers, removePeers };
  addComponents(delta, digest, componentsMoved(sides));
  return { delta, digest };
}

/**
 * The policy before a logged policy change, indexed once per entry (an entry's rules never change),
 * not once per node the change concerns: at 10,000 nodes in groups of 50 a policy has 200 rules.
 */
const policiesBefore = new WeakMap<readonly PolicyRule[], PolicyIndex>();
function policyBefore(rules: readonly PolicyRule[]): PolicyIndex {
  let p = policiesBefore.get(rules);
  if (!p) policiesBefore.set(rules, (p = new PolicyIndex(rules)));
  return p;
}

const groupsOf = (r: RouteGroups | undefined): readonly RouteGroup[] => r?.groups ?? [];

/** The route groups `node` is sent, as the network is now. */
export function routeGroupsNow(net: NetworkState, node: MemberRecord): RouteGroups {
  const r = net.record.components.routeGroups;
  return routeGroupsFor(node, net.policy, groupsOf(r), (id) => net.members.has(id), r?.primaries);
}

function controlNodeMoved(net: NetworkState, before: Before): boolean {
  for (const [id, then] of before.members) if ((then && isControlNode(then.tags)) || isControlNode(net.members.get(id)?.tags ?? [])) return true;
  return false;
}

function sameList(a: readonly string[], b: readonly string[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

function symmetric(a: Set<string>, b: Set<string>, out: Set<string>): void {
  for (const x of a) if (!b.has(x)) out.add(x);
  for (const x of b) if (!a.has(x)) out.add(x);
}

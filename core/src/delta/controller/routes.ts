/**
 * Route groups (issue 26): prefixes reached through via nodes. The network stores every group; each
 * node is sent only the groups its policy lets it use (a rule whose destination is `route:NAME`) and
 * the groups it serves, so a node is never told of a LAN it may not reach. A node that uses a group has
 * the group's via nodes in its view (as peers it may reach), and a via node has the group's users
 * (inbound only), whatever the policy says of their tags: the tunnel needs the peer to carry the prefixes.
 *
 * The primary of a group is the one the controller chose (`primaries`: see `failover`), else the
 * first via node, in the operator's order, that is a member; it is said in the component as the first
 * of `viaPeers` (the rest follow in order).
 */
import type { RouteGroup, RouteGroups } from '../../contract/wire.js';
import { isExitGroup, ROUTE_TAG_PREFIX } from '../../schema/routes.js';
import { SCOPE, type PolicyIndex, type Scope } from './policy.js';
import type { MemberRecord } from './records.js';

export const routeTag = (group: string): string => `${ROUTE_TAG_PREFIX}${group}`;

/** The group a policy destination names, or null when it is a tag. */
export const routeOfTag = (to: string): string | null => (to.startsWith(ROUTE_TAG_PREFIX) ? to.slice(ROUTE_TAG_PREFIX.length) : null);

export type IsMember = (id: string) => boolean;

/** The group's via nodes that are members, the primary first, the rest in the operator's order (the order of preference). */
export function liveVia(g: RouteGroup, isMember: IsMember, primaries?: Readonly<Record<string, string>>): string[] {
  const via = g.viaPeers.filter(isMember);
  const chosen = primaries?.[g.name];
  return chosen && via.includes(chosen) ? [chosen, ...via.filter((v) => v !== chosen)] : via;
}

/**
 * The primaries once `node`'s stream opened (`up`) or ended: a primary that went down hands each of
 * its groups to the first via node, in order, that is up; a via node that comes up takes a group only
 * when its primary is not up (no flap back). Null: nothing changes.
 */
export function failover(
  groups: readonly RouteGroup[],
  primaries: Readonly<Record<string, string>> | undefined,
  node: string,
  up: boolean,
  isUp: (id: string) => boolean,
  isMember: IsMember,
): Record<string, string> | null {
  const next: Record<string, string> = { ...(primaries ?? {}) };
  let moved = false;
  for (const g of groups) {
    if (!g.viaPeers.includes(node)) continue;
    const current = liveVia(g, isMember, primaries)[0];
    let chosen = current;
    if (!up && current === node) chosen = g.viaPeers.find((v) => v !== node && isMember(v) && isUp(v)) ?? current;
    if (up && current !== node && (current === undefined || !isUp(current))) chosen = node;
    if (chosen && chosen !== current) {
      next[g.name] = chosen;
      moved = true;
    }
  }
  return moved ? next : null;
}

/** A group as stored: an exit node's carries the members that opted in to it (records.ts ExitChoice). */
export type StoredRouteGroup = RouteGroup & { exitUsers?: readonly string[] };

/** Whether the policy lets the holder of `node`'s tags use the group: a rule from one of its tags to `route:NAME`. */
export function allowedToUse(node: MemberRecord, g: RouteGroup, policy: PolicyIndex): boolean {
  return policy.reachTags(node.tags).has(routeTag(g.name));
}

/**
 * Whether the node uses the group: the policy allows it, and, for an exit node (ADR 0039), the node
 * opted in to that one (it is among the group's `exitUsers`): an exit node is never used unasked.
 */
export function mayUse(node: MemberRecord, g: StoredRouteGroup, policy: PolicyIndex): boolean {
  if (isExitGroup(g) && !g.exitUsers?.includes(node.id)) return false;
  return allowedToUse(node, g, policy);
}

/** The groups the node is sent: those it serves (with every via node), and those it may use and someone serves. */
export function routeGroupsFor(
  node: MemberRecord,
  policy: PolicyIndex,
  groups: readonly RouteGroup[],
  isMember: IsMember,
  primaries?: Readonly<Record<string, string>>,
): RouteGroups {
  const out: RouteGroup[] = [];
  for (const g of groups) {
    const via = liveVia(g, isMember, primaries);
    const serves = g.viaPeers.includes(node.id);
    if (!serves && (via.length === 0 || !mayUse(node, g, policy))) continue;
    out.push({ name: g.name, prefixes: [...g.prefixes], viaPeers: via, noMasquerade: g.noMasquerade === true });
  }
  return { groups: out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0)) };
}

/** What `peer` is in `node`'s view through the route groups alone. */
export function routeScope(node: MemberRecord, peer: MemberRecord, policy: PolicyIndex, groups: readonly RouteGroup[]): Scope {
  if (node.id === peer.id) return SCOPE.NONE;
  let inbound = false;
  for (const g of groups) {
    if (g.viaPeers.includes(peer.id) && mayUse(node, g, policy)) return SCOPE.REACH;
    if (!inbound && g.viaPeers.includes(node.id) && mayUse(peer, g, policy)) inbound = true;
  }
  return inbound ? SCOPE.INBOUND_ONLY : SCOPE.NONE;
}

export type Scoper = (node: MemberRecord, peer: MemberRecord) => Scope;

/** The scope the deltas use: the policy's, widened by the route groups (never narrowed). */
export function scoperOf(policy: PolicyIndex, groups: readonly RouteGroup[]): Scoper {
  if (groups.length === 0) return (node, peer) => policy.scope(node, peer);
  return (node, peer) => {
    const s = policy.scope(node, peer);
    if (s === SCOPE.REACH || peer.expiredAt) return s;
    const r = routeScope(node, peer, policy, groups);
    return r === SCOPE.NONE ? s : r === SCOPE.REACH ? r : SCOPE.INBOUND_ONLY;
  };
}

/**
 * The members the route groups may put in the node's view: the via nodes of the groups it may use,
 * and the users of the groups it serves (the holders of the tags a rule lets reach `route:NAME`).
 */
export function routePeersOf(
  node: MemberRecord,
  policy: PolicyIndex,
  groups: readonly RouteGroup[],
  holders: (tag: string) => Iterable<string>,
  out: Set<string> = new Set(),
): Set<string> {
  for (const g of groups) {
    if (mayUse(node, g, policy)) for (const v of g.viaPeers) out.add(v);
    if (g.viaPeers.includes(node.id)) for (const t of policy.reachedByTags([routeTag(g.name)])) for (const id of holders(t)) out.add(id);
  }
  out.delete(node.id);
  return out;
}

/** The `route:NAME` destinations of the groups `node` is a via node of: its filter carries their rules. */
export function servedRouteTags(node: MemberRecord, groups: readonly RouteGroup[]): string[] {
  return groups.filter((g) => g.viaPeers.includes(node.id)).map((g) => routeTag(g.name));
}

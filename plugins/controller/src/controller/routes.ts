/**
 * A network's route groups (issue 26): declared by the operator (`route set`), read back with each
 * group's primary and its users, and removed. Stored as one component; each node is sent only the
 * groups its policy lets it use or that it serves (core delta/controller/routes.ts), so a change's
 * preview names exactly the nodes whose component or view would move.
 */
import { MeshpError, type RouteGroup } from '@meshp/core';
import { failover, liveVia, mayUse, routeGroupsFor, type PolicyIndex, type NetworkState } from '@meshp/core/delta';
import { overlaps } from '@meshp/core/net';
import { canonicalJson } from '@meshp/core/reconcile';
import { ROUTE_LIMITS, checkRouteGroup } from '@meshp/core/schema';
import { notFound } from '@meshp/core/util';
import { setComponent } from './networks.js';
import type { ControllerState } from './state.js';

export interface RouteGroupStatus {
  group: RouteGroup;
  /** The via node the group's users send its prefixes to ('': no via node is a member). */
  primary: string;
  /** The members whose policy lets them use the group. */
  users: string[];
  /** Via nodes named that are not members of the network. */
  missingVia: string[];
}

export interface RouteChange {
  stateVersion: number;
  /** The members whose route groups or view change (or would, with preview). */
  changedNodes: string[];
}

const groupsOf = (net: NetworkState): RouteGroup[] => net.record.components.routeGroups?.groups ?? [];
const primariesOf = (net: NetworkState): Record<string, string> => net.record.components.routeGroups?.primaries ?? {};

export function listRouteGroups(s: ControllerState, network: string): RouteGroupStatus[] {
  const net = s.net(network);
  const isMember = (id: string) => net.members.has(id);
  return groupsOf(net).map((g) => {
    const via = liveVia(g, isMember, primariesOf(net));
    const users = [...net.members.values()].filter((m) => !g.viaPeers.includes(m.id) && mayUse(m, g, net.policy)).map((m) => m.id);
    return { group: structuredClone(g), primary: via[0] ?? '', users: users.sort(), missingVia: g.viaPeers.filter((v) => !isMember(v)) };
  });
}

/** Adds or replaces the group of that name (with `preview`: only says which nodes it would change). */
export function setRouteGroup(s: ControllerState, network: string, wanted: RouteGroup, preview: boolean): RouteChange {
  const g = checkRouteGroup(wanted);
  const net = s.net(network);
  for (const v of g.viaPeers) if (!net.members.has(v)) throw notFound('node', v, network, `route group ${g.name} names it as a via node`);
  const others = groupsOf(net).filter((x) => x.name !== g.name);
  if (others.length >= ROUTE_LIMITS.groups)
    throw new MeshpError('MESHP_INPUT_TOO_LARGE', `${network} has ${others.length} route groups: at most ${ROUTE_LIMITS.groups}`);
  for (const p of g.prefixes) {
    if (net.record.privateRange && overlaps(p, net.record.privateRange)) {
      throw new MeshpError('MESHP_ROUTE_INVALID', `route group ${g.name}: ${p} overlaps the mesh's private range ${net.record.privateRange}`, {
        details: { prefix: p },
      });
    }
    const clash = others.find((o) => o.prefixes.some((q) => overlaps(p, q)));
    if (clash) {
      throw new MeshpError(
        'MESHP_ROUTE_INVALID',
        `route group ${g.name}: ${p} overlaps a prefix of route group ${clash.name}: one group per prefix (its via nodes are its failover)`,
        {
          details: { prefix: p, group: clash.name },
        },
      );
    }
  }
  const after = [...others, g].sort((a, b) => (a.name < b.name ? -1 : 1));
  return change(s, network, after, preview);
}

/**
 * Approves prefixes `node` advertises (all of them when none are named): the node becomes a via node
 * of `group` (made when absent, after the via nodes it has) and the prefixes the group's. A prefix the
 * node does not advertise is refused: an admin declares those with `route set`.
 */
export function approveRoute(
  s: ControllerState,
  network: string,
  node: string,
  advertised: readonly string[],
  prefixes: readonly string[],
  groupName: string,
  preview: boolean,
): RouteChange & { group: RouteGroup } {
  const net = s.net(network);
  if (!net.members.has(node)) throw notFound('node', node, network);
  const asked = prefixes.length ? [...prefixes] : [...advertised];
  if (!asked.length) throw new MeshpError('MESHP_ROUTE_INVALID', `${node} advertises no route (meshp agent --advertise-route PREFIX): nothing to approve`);
  for (const p of asked) {
    if (!advertised.includes(p)) {
      throw new MeshpError(
        'MESHP_ROUTE_INVALID',
        `${node} does not advertise ${p} (it advertises ${advertised.join(', ') || 'nothing'}): declare it with route set`,
        {
          details: { node, prefix: p },
        },
      );
    }
  }
  const had = groupsOf(net).find((g) => g.name === groupName);
  const group = {
    name: groupName,
    prefixes: [...new Set([...(had?.prefixes ?? []), ...asked])],
    viaPeers: had?.viaPeers.includes(node) ? [...had.viaPeers] : [...(had?.viaPeers ?? []), node],
    noMasquerade: had?.noMasquerade === true,
  };
  const out = setRouteGroup(s, network, group, preview);
  return { ...out, group: checkRouteGroup(group) };
}

export function removeRouteGroup(s: ControllerState, network: string, name: string, preview: boolean): RouteChange {
  const net = s.net(network);
  if (!groupsOf(net).some((g) => g.name === name)) throw notFound('route group', name, network);
  return change(
    s,
    network,
    groupsOf(net).filter((g) => g.name !== name),
    preview,
  );
}

function change(s: ControllerState, network: string, after: RouteGroup[], preview: boolean): RouteChange {
  const net = s.net(network);
  // A primary chosen stays chosen while it is still a via node of its group.
  const primaries = Object.fromEntries(Object.entries(primariesOf(net)).filter(([g, v]) => after.some((x) => x.name === g && x.viaPeers.includes(v))));
  const changedNodes = nodesMoved(net, net.policy, { groups: groupsOf(net), primaries: primariesOf(net) }, { groups: after, primaries });
  if (preview) return { stateVersion: net.version, changedNodes };
  return { stateVersion: setComponent(s, network, 'routeGroups', { groups: after, ...(Object.keys(primaries).length ? { primaries } : {}) }), changedNodes };
}

/**
 * A via node renamed (`node rename`): its groups, and the primaries chosen, name it by its new name,
 * in the version after the rename's (null: it serves no group). Both are committed before the hub
 * pumps, so its users get one delta that moves the peer and keeps the route.
 */
export function renameVia(s: ControllerState, network: string, id: string, to: string): number | null {
  const net = s.net(network);
  const groups = groupsOf(net);
  if (!groups.some((g) => g.viaPeers.includes(id))) return null;
  const after = groups.map((g) => ({ ...g, viaPeers: g.viaPeers.map((v) => (v === id ? to : v)) }));
  const primaries = Object.fromEntries(Object.entries(primariesOf(net)).map(([g, v]) => [g, v === id ? to : v]));
  return setComponent(s, network, 'routeGroups', { groups: after, ...(Object.keys(primaries).length ? { primaries } : {}) });
}

/** Whether `node` is a via node of any group: only then does its stream's opening or ending move a primary. */
export function servesRoutes(s: ControllerState, network: string, node: string): boolean {
  return groupsOf(s.net(network)).some((g) => g.viaPeers.includes(node));
}

/**
 * `node`'s stream opened (`up`) or ended: the groups whose primary it was go to the next via node that
 * is up (`isUp`: a stream open on this controller), and a group whose primary is not up goes to it.
 * Answers the via nodes now primary of a group that moved, or null when nothing moved.
 */
export function routeLiveness(s: ControllerState, network: string, node: string, up: boolean, isUp: (id: string) => boolean): Record<string, string> | null {
  const net = s.net(network);
  const next = failover(groupsOf(net), primariesOf(net), node, up, isUp, (id) => net.members.has(id));
  if (!next) return null;
  setComponent(s, network, 'routeGroups', { groups: groupsOf(net), primaries: next });
  return next;
}

/** The members whose route groups component differs between the two lists (their view moves with it: the via nodes and the users). */
type Stored = { groups: readonly RouteGroup[]; primaries: Record<string, string> };

function nodesMoved(net: NetworkState, policy: PolicyIndex, before: Stored, after: Stored): string[] {
  const isMember = (id: string) => net.members.has(id);
  const out: string[] = [];
  for (const m of net.members.values()) {
    const a = canonicalJson(routeGroupsFor(m, policy, before.groups, isMember, before.primaries));
    const b = canonicalJson(routeGroupsFor(m, policy, after.groups, isMember, after.primaries));
    if (a !== b) out.push(m.id);
  }
  return out.sort();
}

export interface NodeRoute {
  group: string;
  role: 'serves' | 'uses';
  prefixes: string[];
  primary: string;
}

/** The groups `node` serves or may use, each with its primary: what `node show` says of routes. */
export function nodeRoutes(s: ControllerState, network: string, node: string): NodeRoute[] {
  const net = s.net(network);
  const m = net.members.get(node);
  if (!m) return [];
  const out: NodeRoute[] = [];
  for (const g of groupsOf(net)) {
    const role = g.viaPeers.includes(node) ? 'serves' : mayUse(m, g, net.policy) ? 'uses' : null;
    if (!role) continue;
    out.push({ group: g.name, role, prefixes: [...g.prefixes], primary: liveVia(g, (id) => net.members.has(id), primariesOf(net))[0] ?? '' });
  }
  return out;
}

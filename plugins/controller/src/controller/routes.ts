/**
 * A network's route groups (issue 26): declared by the operator (`route set`), read back with each
 * group's primary and its users, and removed. Stored as one component; each node is sent only the
 * groups its policy lets it use or that it serves (core delta/controller/routes.ts), so a change's
 * preview names exactly the nodes whose component or view would move.
 */
import { MeshpError, type RouteGroup } from '@meshp/core';
import {
  EXIT_OFF,
  failover,
  liveVia,
  mayUse,
  routeGroupsFor,
  type ExitChoice,
  type NetworkState,
  type PolicyIndex,
  type StoredRouteGroup,
} from '@meshp/core/delta';
import { overlaps } from '@meshp/core/net';
import { canonicalJson } from '@meshp/core/reconcile';
import { ROUTE_LIMITS, checkRouteGroup, isExitGroup } from '@meshp/core/schema';
import { notFound } from '@meshp/core/util';
import { chosenExit, exitNodeOfNet, exitsOf, groupsOf, primariesOf, type ExitNodeStatus } from './exit-status.js';
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
  /** An exit node (ADR 0039): its prefixes are default routes; its users opted in. */
  exit: boolean;
}

export interface RouteChange {
  stateVersion: number;
  /** The members whose route groups or view change (or would, with preview). */
  changedNodes: string[];
}

/**
 * The component as stored: each exit group carries the members whose choice names it (`exitUsers`,
 * read by `mayUse`), other groups none; the choices themselves kept (an empty choice dropped).
 */
function stored(groups: readonly StoredRouteGroup[], primaries: Record<string, string>, exits: Record<string, ExitChoice>) {
  const choices = Object.fromEntries(Object.entries(exits).filter(([, c]) => c.admin !== undefined || c.agent !== undefined));
  const out = groups.map(({ exitUsers: _, ...g }) => {
    if (!isExitGroup(g)) return g;
    const users = Object.keys(choices)
      .filter((id) => chosenExit(choices[id]) === g.name)
      .sort();
    return users.length ? { ...g, exitUsers: users } : g;
  });
  return { groups: out, ...(Object.keys(primaries).length ? { primaries } : {}), ...(Object.keys(choices).length ? { exits: choices } : {}) };
}

export function listRouteGroups(s: ControllerState, network: string): RouteGroupStatus[] {
  const net = s.net(network);
  const isMember = (id: string) => net.members.has(id);
  return groupsOf(net).map((g) => {
    const via = liveVia(g, isMember, primariesOf(net));
    const users = [...net.members.values()].filter((m) => !g.viaPeers.includes(m.id) && mayUse(m, g, net.policy)).map((m) => m.id);
    const { exitUsers: _, ...group } = structuredClone(g);
    return { group, primary: via[0] ?? '', users: users.sort(), missingVia: g.viaPeers.filter((v) => !isMember(v)), exit: isExitGroup(g) };
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
  // An exit node's default routes overlap everything by nature: several exit nodes stand side by side,
  // each node using one at most (its choice), and a node's more specific routes win over them.
  for (const p of isExitGroup(g) ? [] : g.prefixes) {
    if (net.record.privateRange && overlaps(p, net.record.privateRange)) {
      throw new MeshpError('MESHP_ROUTE_INVALID', `route group ${g.name}: ${p} overlaps the mesh's private range ${net.record.privateRange}`, {
        details: { prefix: p },
      });
    }
    const clash = others.find((o) => !isExitGroup(o) && o.prefixes.some((q) => overlaps(p, q)));
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
  const value = stored(after, primaries, exitsOf(net));
  const changedNodes = nodesMoved(net, net.policy, { groups: groupsOf(net), primaries: primariesOf(net) }, value);
  if (preview) return { stateVersion: net.version, changedNodes };
  return { stateVersion: setComponent(s, network, 'routeGroups', value), changedNodes };
}

/**
 * A via node renamed (`node rename`): its groups, and the primaries chosen, name it by its new name,
 * in the version after the rename's (null: it serves no group). Both are committed before the hub
 * pumps, so its users get one delta that moves the peer and keeps the route.
 */
export function renameVia(s: ControllerState, network: string, id: string, to: string): number | null {
  const net = s.net(network);
  const groups = groupsOf(net);
  const exits = exitsOf(net);
  if (!groups.some((g) => g.viaPeers.includes(id)) && !exits[id]) return null;
  const after = groups.map((g) => ({ ...g, viaPeers: g.viaPeers.map((v) => (v === id ? to : v)) }));
  const primaries = Object.fromEntries(Object.entries(primariesOf(net)).map(([g, v]) => [g, v === id ? to : v]));
  // An exit node's user renamed keeps its choice under its new name.
  const renamed = Object.fromEntries(Object.entries(exits).map(([n, c]) => [n === id ? to : n, c]));
  return setComponent(s, network, 'routeGroups', stored(after, primaries, renamed));
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
  setComponent(s, network, 'routeGroups', stored(groupsOf(net), next, exitsOf(net)));
  return next;
}

/** The members whose route groups component differs between the two lists (their view moves with it: the via nodes and the users). */
type Stored = { groups: readonly StoredRouteGroup[]; primaries?: Record<string, string> | undefined };

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

/** Which exit node the node uses, and why (ADR 0039): what `node show`, `doctor` and `/metrics` say. */
export { exitNodeOfNet, type ExitNodeStatus };

export function exitNodeOf(s: ControllerState, network: string, node: string): ExitNodeStatus {
  return exitNodeOfNet(s.net(network), node);
}

/**
 * The admin's setting of the exit node `node` uses (`meshp node exit-node NODE NAME|--off`): a group
 * that is an exit node, or off (none, whatever its agent asks); `clear`: the admin's setting goes and
 * the agent's --exit-node holds again. With `preview`, only the nodes it would change are said.
 */
export function setExitNode(
  s: ControllerState,
  network: string,
  node: string,
  choice: { group?: string; off?: boolean },
  preview: boolean,
): RouteChange & ExitNodeStatus {
  const net = s.net(network);
  if (!net.members.has(node)) throw notFound('node', node, network);
  if (choice.group && choice.off) throw new MeshpError('MESHP_ROUTE_INVALID', `exit node of ${node}: a group name or --off, not both`);
  if (choice.group) {
    const g = groupsOf(net).find((x) => x.name === choice.group);
    if (!g) throw notFound('route group', choice.group, network, `the exit node of ${node}`);
    if (!isExitGroup(g))
      throw new MeshpError(
        'MESHP_ROUTE_INVALID',
        `route group ${g.name} is not an exit node (its prefixes are ${g.prefixes.join(', ')}, not 0.0.0.0/0 and ::/0)`,
        {
          details: { group: g.name },
        },
      );
    if (g.viaPeers.includes(node)) throw new MeshpError('MESHP_ROUTE_INVALID', `${node} is a via node of ${g.name}: an exit node does not use itself`);
  }
  const exits = { ...exitsOf(net) };
  const { admin: _, ...rest } = exits[node] ?? {};
  exits[node] = choice.off ? { ...rest, admin: EXIT_OFF } : choice.group ? { ...rest, admin: choice.group } : rest;
  return exitChange(s, network, node, exits, preview);
}

/**
 * The agent's own ask (its Hello's exit_node, from `meshp agent --exit-node NAME`; '' none): stored
 * as the node's choice when it differs from the one kept. Null: nothing changed.
 */
export function exitAsked(s: ControllerState, network: string, node: string, group: string): RouteChange | null {
  const net = s.net(network);
  if (!net.members.has(node) || (exitsOf(net)[node]?.agent ?? '') === group) return null;
  const exits = { ...exitsOf(net) };
  const { agent: _, ...rest } = exits[node] ?? {};
  exits[node] = group ? { ...rest, agent: group } : rest;
  return exitChange(s, network, node, exits, false);
}

/** The agent's ask kept for the node ('' none): its Hello moves the controller only when it differs. */
export const exitAskedOf = (s: ControllerState, network: string, node: string): string => exitsOf(s.net(network))[node]?.agent ?? '';

function exitChange(s: ControllerState, network: string, node: string, exits: Record<string, ExitChoice>, preview: boolean): RouteChange & ExitNodeStatus {
  const net = s.net(network);
  const value = stored(groupsOf(net), primariesOf(net), exits);
  const moved = new Set(nodesMoved(net, net.policy, { groups: groupsOf(net), primaries: primariesOf(net) }, value));
  // The exit node's via nodes gain or lose the node as a peer (their own component is unchanged).
  if (moved.has(node))
    for (const g of [...groupsOf(net), ...value.groups])
      if (isExitGroup(g) && (g as StoredRouteGroup).exitUsers?.includes(node)) g.viaPeers.forEach((v) => moved.add(v));
  const changedNodes = [...moved].sort();
  const status = () => exitNodeOfNet(net, node);
  if (preview) {
    // What the node would use: computed on the component as it would be, then put back.
    const was = net.record.components.routeGroups;
    net.record.components = { ...net.record.components, routeGroups: value };
    try {
      return { stateVersion: net.version, changedNodes, ...status() };
    } finally {
      net.record.components = { ...net.record.components, routeGroups: was };
    }
  }
  return { stateVersion: setComponent(s, network, 'routeGroups', value), changedNodes, ...status() };
}

/**
 * Which exit node a node uses, and why (ADR 0039), from the network's state alone: what `node show`,
 * `doctor` and `/metrics` say (status.ts), apart from the route changes (routes.ts) so that the
 * status does not import the controller's writers.
 */
import { allowedToUse, EXIT_OFF, liveVia, type ExitChoice, type NetworkState, type StoredRouteGroup } from '@meshp/core/delta';
import { isExitGroup } from '@meshp/core/schema';

export const groupsOf = (net: NetworkState): StoredRouteGroup[] => net.record.components.routeGroups?.groups ?? [];
export const primariesOf = (net: NetworkState): Record<string, string> => net.record.components.routeGroups?.primaries ?? {};
export const exitsOf = (net: NetworkState): Record<string, ExitChoice> => net.record.components.routeGroups?.exits ?? {};

/** The exit node a node's choice names ('' none): the admin's setting wins, EXIT_OFF is none. */
export const chosenExit = (c: ExitChoice | undefined): string => {
  const v = c?.admin ?? c?.agent ?? '';
  return v === EXIT_OFF ? '' : v;
};

export interface ExitNodeStatus {
  /** The exit node (group) the node uses; '' none. */
  exitNode: string;
  /** Why: admin | agent (what chose it), or why none: off | not allowed | no such group | no via node | '' (none asked). */
  reason: string;
  /** The exit node's primary now ('': none). */
  primary: string;
}

export function exitNodeOfNet(net: NetworkState, node: string): ExitNodeStatus {
  const c = exitsOf(net)[node];
  const asked = chosenExit(c);
  const none = (reason: string): ExitNodeStatus => ({ exitNode: '', reason, primary: '' });
  if (!asked) return none(c?.admin === EXIT_OFF || (c?.admin === undefined && c?.agent === EXIT_OFF) ? 'off' : '');
  const m = net.members.get(node);
  const g = groupsOf(net).find((x) => x.name === asked && isExitGroup(x));
  if (!m || !g) return none('no such group');
  if (!allowedToUse(m, g, net.policy)) return none('not allowed');
  const primary = liveVia(g, (id) => net.members.has(id), primariesOf(net))[0] ?? '';
  if (!primary) return none('no via node');
  return { exitNode: g.name, reason: c?.admin !== undefined ? 'admin' : 'agent', primary };
}

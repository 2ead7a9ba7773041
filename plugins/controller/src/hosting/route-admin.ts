/**
 * The admin calls of a network's route groups (issue 26): `route list` reads them back with each
 * group's primary and users and every prefix a node advertises (from its last report), `route set`
 * adds or replaces one (checked by the one schema before anything is stored), `route approve` makes
 * a node's advertised prefixes a group's, `route remove` removes one; with `preview`, each only names
 * the nodes that would change. A change made is recorded in the audit log (audit.ts); a preview is not.
 */
import type { AdminMethods, ReportMessage } from '@meshp/core';
import type { AdminApi } from '@meshp/protocol';
import type { Controller } from '../controller.js';
import { forwardingChanges } from './route-forwarding.js';

type RouteMethod = 'listRouteGroups' | 'setRouteGroup' | 'removeRouteGroup' | 'approveRoute' | 'setExitNode';

export function routeMethods(
  controller: Controller,
  reports: (network: string, node: string) => ReportMessage | null,
  changed: (network: string) => void,
): Pick<AdminMethods<AdminApi>, RouteMethod> {
  const advertisedBy = (net: string, node: string): string[] => reports(net, node)?.advertisedRoutes ?? [];
  const groupOf = (net: string, name: string) => controller.routeGroups(net).find((g) => g.group.name === name)?.group ?? null;
  const forwarding = (net: string, before: Parameters<typeof forwardingChanges>[0], after: Parameters<typeof forwardingChanges>[1]) =>
    forwardingChanges(
      before,
      after,
      (node) => reports(net, node),
      controller.members(net).some((m) => m.addresses.some((a) => a.includes(':'))),
    );
  return {
    listRouteGroups: (_r, net) => {
      const groups = controller.routeGroups(net);
      const servedBy = (node: string, prefix: string) =>
        groups.find((g) => g.group.viaPeers.includes(node) && g.group.prefixes.includes(prefix))?.group.name ?? '';
      const advertised = controller
        .members(net)
        .flatMap((m) => advertisedBy(net, m.id).map((prefix) => ({ node: m.id, prefix, group: servedBy(m.id, prefix) })))
        .sort((a, b) => (a.node === b.node ? (a.prefix < b.prefix ? -1 : 1) : a.node < b.node ? -1 : 1));
      return { groups, advertised };
    },
    setRouteGroup: (r, net) => {
      const group = r.group ?? { name: '', prefixes: [], viaPeers: [], noMasquerade: false };
      const before = groupOf(net, group.name);
      const out = controller.setRouteGroup(net, group, r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview, forwarding: forwarding(net, before, group) };
    },
    approveRoute: (r, net) => {
      const before = groupOf(net, r.group);
      const out = controller.approveRoute(net, r.node, advertisedBy(net, r.node), r.prefixes, r.group, r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview, forwarding: forwarding(net, before, out.group ?? null) };
    },
    setExitNode: (r, net) => {
      const out = controller.setExitNode(net, r.node, { group: r.group, off: r.off }, r.preview);
      if (!r.preview) changed(net);
      return { stateVersion: out.stateVersion, changedNodes: out.changedNodes, preview: r.preview, exitNode: out.exitNode, reason: out.reason };
    },
    removeRouteGroup: (r, net) => {
      const before = groupOf(net, r.name);
      const out = controller.removeRouteGroup(net, r.name, r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview, forwarding: forwarding(net, before, null) };
    },
  };
}

/**
 * The admin calls of a network's route groups (issue 26): `route list` reads them back with each
 * group's primary and users, `route set` adds or replaces one (checked by the one schema before
 * anything is stored), `route remove` removes one; with `preview`, both only name the nodes that
 * would change. A change made is recorded in the audit log (audit.ts); a preview is not.
 */
import type { AdminMethods } from '@meshp/core';
import type { AdminApi } from '@meshp/protocol';
import type { Controller } from '../controller.js';

export function routeMethods(
  controller: Controller,
  changed: (network: string) => void,
): Pick<AdminMethods<AdminApi>, 'listRouteGroups' | 'setRouteGroup' | 'removeRouteGroup'> {
  return {
    listRouteGroups: (_r, net) => ({ groups: controller.routeGroups(net) }),
    setRouteGroup: (r, net) => {
      const out = controller.setRouteGroup(net, r.group ?? { name: '', prefixes: [], viaPeers: [] }, r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview };
    },
    removeRouteGroup: (r, net) => {
      const out = controller.removeRouteGroup(net, r.name, r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview };
    },
  };
}

/**
 * The admin calls of a network's DNS (issue 25): `dns get` reads it back with the domain in force and
 * the foundation names, `dns set` replaces it (checked by the one schema before anything is stored)
 * or, with `preview`, only names the nodes whose answers would change.
 */
import type { AdminMethods } from '@meshp/core';
import { dnsOf } from '@meshp/core/delta';
import type { AdminApi } from '@meshp/protocol';
import type { Controller } from '../controller.js';

export function dnsMethods(controller: Controller, changed: (network: string) => void): Pick<AdminMethods<AdminApi>, 'getDns' | 'setDns'> {
  return {
    getDns: (_r, net) => controller.dns(net),
    setDns: (r, net) => {
      const out = controller.setDns(net, dnsOf(r.dns), r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview };
    },
  };
}

/**
 * The admin calls of a network's relays (issue 27, ADR 0040): `relay list` reads them back with
 * whether each one's secret is held and the members whose last report says they have an allocation
 * on it; `relay set` adds or replaces one (its secret's value given with it, or held already),
 * `relay remove` removes one; with `preview`, each only names the nodes that would change. The secret
 * is never answered. A change made is recorded in the audit log (audit.ts); a preview is not.
 */
import type { AdminMethods, ReportMessage } from '@meshp/core';
import { RELAY_CREDENTIAL_S } from '@meshp/core/delta';
import type { AdminApi } from '@meshp/protocol';
import type { Controller } from '../controller.js';

type RelayMethod = 'listRelays' | 'setRelay' | 'removeRelay';

export function relayMethods(
  controller: Controller,
  reports: (network: string, node: string) => ReportMessage | null,
  changed: (network: string) => void,
): Pick<AdminMethods<AdminApi>, RelayMethod> {
  return {
    listRelays: (_r, net) => {
      const members = controller.members(net);
      return {
        relays: controller.relays(net).map((x) => ({
          relay: x.relay,
          secretHeld: x.secretHeld,
          allocations: members.flatMap((m) => {
            const rep = reports(net, m.id);
            return rep?.relayedAddress && rep.relayId === x.relay.id ? [{ node: m.id, relayedAddress: rep.relayedAddress }] : [];
          }),
        })),
        credentialSeconds: RELAY_CREDENTIAL_S,
      };
    },
    setRelay: (r, net) => {
      const out = controller.setRelay(net, r.relay ?? {}, r.secret, r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview };
    },
    removeRelay: (r, net) => {
      const out = controller.removeRelay(net, r.id, r.preview);
      if (!r.preview) changed(net);
      return { ...out, preview: r.preview };
    },
  };
}

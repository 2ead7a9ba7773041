/**
 * The admin calls that read the catalogue and the enrolment tokens back, and remove what is no
 * longer wanted (issue 33): `catalogue list | show | remove`, `token list | revoke`. A module
 * assigned to a node is never removed (MESHP_MODULE_ASSIGNED names the nodes); a token is shown by
 * its id, never its secret, and only an unused one is revoked.
 */
import { modeToWire } from '@meshp/core/delta';
import type { AdminApi, AdminAnswer } from '@meshp/protocol';
import type { AdminMethods } from '@meshp/core';
import { catalogueInfo } from '../catalogue.js';
import type { Controller } from '../controller.js';
import type { Enrolment } from './enrolment.js';
import type { TokenInfo } from './token-rows.js';
import { notFound, usage } from '@meshp/core/util';

type ReadbackMethod = 'listCatalogue' | 'showCatalogueModule' | 'removeCatalogueModule' | 'listEnrolmentTokens' | 'revokeEnrolmentToken';
type WireToken = NonNullable<AdminAnswer<'revokeEnrolmentToken'>['token']>;

const need = (v: string, k: string): string => {
  if (!v) throw usage(`${k} is required`);
  return v;
};

/** What became of a token, now: revoked and used are for good; an unused one past its expiry is expired. */
export function tokenState(t: TokenInfo, now: number): 'unused' | 'in-use' | 'used' | 'expired' | 'revoked' {
  if (t.usedAt) return 'used';
  // A reusable token (issue 28): used once every use is taken; in use while some are.
  const uses = t.uses ?? 0;
  if (t.maxUses != null && uses >= t.maxUses) return 'used';
  if (t.revokedAt) return 'revoked';
  if (Date.parse(t.expiresAt) <= now) return 'expired';
  return uses > 0 ? 'in-use' : 'unused';
}

export function tokenToWire(t: TokenInfo, now: number): WireToken {
  return {
    id: t.id,
    network: t.network,
    mode: modeToWire(t.mode),
    tags: [...t.tags],
    createdAt: t.createdAt ?? '',
    expiresAt: t.expiresAt,
    state: tokenState(t, now),
    usedBy: t.usedBy ?? '',
    usedAt: t.usedAt ?? '',
    confirmed: t.confirmedAt !== null,
    revokedAt: t.revokedAt ?? '',
    reusable: t.maxUses != null,
    uses: t.maxUses != null ? (t.uses ?? 0) : t.usedAt ? 1 : 0,
    maxUses: t.maxUses ?? 1,
    ephemeral: t.ephemeralSeconds != null,
    ephemeralGraceSeconds: t.ephemeralSeconds ?? 0,
  };
}

export function readbackMethods(
  controller: Controller,
  enrolment: Enrolment,
  changed: (network: string) => void,
  now: () => number = Date.now,
): Pick<AdminMethods<AdminApi>, ReadbackMethod> {
  const one = (net: string, name: string) => {
    const def = controller.modules(net).find((m) => m.name === name);
    if (!def) throw notFound('module', name, `the catalogue of ${net}`);
    return { def, info: catalogueInfo([def], controller.members(net))[0]! };
  };
  return {
    listCatalogue: (_r, net) => ({ modules: catalogueInfo(controller.modules(net), controller.members(net)) }),
    showCatalogueModule: (r, net) => {
      const { def, info } = one(net, need(r.module, 'module'));
      return { module: info, definitionJson: JSON.stringify(def) };
    },
    removeCatalogueModule: (r, net) => {
      const stateVersion = controller.removeModule(net, need(r.module, 'module'));
      changed(net);
      return { stateVersion };
    },
    listEnrolmentTokens: (_r, net) => {
      const at = now();
      return { tokens: enrolment.listTokens(net).map((t) => tokenToWire(t, at)) };
    },
    revokeEnrolmentToken: (r, net) => {
      const { token } = enrolment.revokeToken(net, need(r.id, 'id').toLowerCase());
      return { token: tokenToWire(token, now()) };
    },
  };
}

/**
 * `meshp route set NAME --prefix P --via NODE` (issue 26): a route group as the operator gives it,
 * checked the same way by the CLI (before sending) and the controller (before storing). Prefixes are
 * canonical CIDR (host bits zero: `192.168.77.1/24` is refused, not silently masked), IPv4 or IPv6;
 * a default route (`/0`) makes the group an exit node (ADR 0039): its prefixes are then only
 * `0.0.0.0/0` and/or `::/0` — a group mixing a default route with a LAN is refused.
 */
import { z } from 'zod';
import type { RouteGroup } from '../contract/wire.js';
import { MeshpError } from '../errors.js';
import { addressFamily, parseRange } from '../net/address.js';
import { checkInput } from './check.js';
import { name } from './fields.js';

/** The most prefixes, via nodes and groups one network holds: each is a few lookups per delta. */
export const ROUTE_LIMITS = Object.freeze({ prefixes: 256, via: 64, groups: 1_024 });

/** A policy rule's destination naming a route group: `route:NAME`. */
export const ROUTE_TAG_PREFIX = 'route:';

const prefix = z.string().superRefine((text, ctx) => {
  const [addr, len] = text.split('/');
  if (len === undefined || !addressFamily(addr ?? '') || !/^\d{1,3}$/.test(len)) {
    return void ctx.addIssue({ code: 'custom', message: `${JSON.stringify(text)} is not a prefix like 192.168.77.0/24 or fd00:77::/64` });
  }
  let canonical: string;
  try {
    canonical = parseRange(text, 'MESHP_ROUTE_INVALID').text;
  } catch {
    return void ctx.addIssue({ code: 'custom', message: `${JSON.stringify(text)} is not a prefix like 192.168.77.0/24 or fd00:77::/64` });
  }
  if (canonical !== text) return void ctx.addIssue({ code: 'custom', message: `${text} has host bits set: the prefix is ${canonical}` });
});

/** The default routes: an exit node's prefixes (ADR 0039). */
export const EXIT_PREFIXES: readonly string[] = Object.freeze(['0.0.0.0/0', '::/0']);

/** Whether the group is an exit node: its prefixes are default routes only. */
export const isExitGroup = (g: { prefixes: readonly string[] }): boolean => g.prefixes.length > 0 && g.prefixes.every((p) => EXIT_PREFIXES.includes(p));

export const routeGroupSchema = z.strictObject({
  name,
  prefixes: z.array(prefix).min(1).max(ROUTE_LIMITS.prefixes),
  via: z.array(name).min(1).max(ROUTE_LIMITS.via),
});

/** A route group as the wire carries it, checked: prefixes and via nodes once each, prefixes sorted, via in the operator's order (the order of preference). */
export function checkRouteGroup(g: { name: string; prefixes: readonly string[]; viaPeers: readonly string[]; noMasquerade?: boolean }): RouteGroup {
  const r = checkInput(routeGroupSchema, { name: g.name, prefixes: [...g.prefixes], via: [...g.viaPeers] }, 'route group', 'MESHP_ROUTE_INVALID');
  const twice = (list: readonly string[]) => list.find((x, i) => list.indexOf(x) !== i);
  const p = twice(r.prefixes);
  if (p) throw new MeshpError('MESHP_ROUTE_INVALID', `route group ${r.name}: prefix ${p} is given twice`);
  const v = twice(r.via);
  if (v) throw new MeshpError('MESHP_ROUTE_INVALID', `route group ${r.name}: via ${v} is given twice`);
  const dflt = r.prefixes.find((x) => EXIT_PREFIXES.includes(x));
  if (dflt && !isExitGroup(r)) {
    throw new MeshpError(
      'MESHP_ROUTE_INVALID',
      `route group ${r.name}: ${dflt} is a default route: an exit node's group holds only 0.0.0.0/0 and ::/0 (route set NAME --exit), not other prefixes`,
      { details: { prefix: dflt } },
    );
  }
  return { name: r.name, prefixes: [...r.prefixes].sort(), viaPeers: [...r.via], noMasquerade: g.noMasquerade === true };
}

/** `meshp agent --advertise-route PREFIX`: the prefixes checked as a group's are (canonical; a default route offers an exit node), once each, sorted. */
export function checkAdvertisedRoutes(prefixes: readonly string[]): string[] {
  const list = checkInput(z.array(prefix).max(ROUTE_LIMITS.prefixes), [...prefixes], 'advertised routes', 'MESHP_ROUTE_INVALID');
  return [...new Set(list)].sort();
}

/**
 * The node's routes, read where the runner runs its commands (`ip -j route`, both families): which
 * sources arrive on which interface (core's arrivalsOf), so `iifname "pppoe-wan"` is read as the
 * sources whose route back leaves by it. Unreadable routes leave `iifname` unread, as before.
 */
import { arrivalsOf, routesFromIpJson, type Arrivals, type RouteEntry } from '@meshp/core/net';
import type { Runner } from './runner.js';
import type { Ruleset } from './schema.js';

async function routesOf(runner: Runner, family: 4 | 6): Promise<RouteEntry[] | null> {
  const r = await runner(['ip', '-j', `-${family}`, 'route', 'show', 'table', 'main']).catch(() => null);
  return r && r.code === 0 ? routesFromIpJson(r.stdout, family) : null;
}

/** The arrivals of both families, or undefined when the routes cannot be read. */
export async function readArrivals(runner: Runner): Promise<Arrivals | undefined> {
  const [v4, v6] = await Promise.all([routesOf(runner, 4), routesOf(runner, 6)]);
  if (!v4 && !v6) return undefined;
  return arrivalsOf([...(v4 ?? []), ...(v6 ?? [])]);
}

/** Whether a rule of the ruleset matches an incoming interface other than lo (only then are the routes read). */
export function matchesInterfaces(rs: Ruleset): boolean {
  const onInterface = (left: unknown) => {
    const key = (left as { meta?: { key?: unknown } } | null)?.meta?.key;
    return key === 'iif' || key === 'iifname';
  };
  return rs.rules.some((r) =>
    r.expr.some((e) => {
      const m = (e as { match?: { left?: unknown; right?: unknown } }).match;
      return !!m && onInterface(m.left) && m.right !== 'lo';
    }),
  );
}

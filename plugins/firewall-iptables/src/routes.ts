/**
 * The node's routes, read where the runner runs its commands (`ip -j route`, both families): which
 * sources arrive on which interface (core's arrivalsOf), so `-i ens3` is read as the sources whose
 * route back leaves by ens3. Unreadable routes (no `ip`, odd output) leave `-i` unread, as before.
 */
import { arrivalsOf, routesFromIpJson, type Arrivals, type RouteEntry } from '@meshp/core/net';
import type { CommandRunner } from './runner.js';

async function routesOf(runner: CommandRunner, family: 4 | 6): Promise<RouteEntry[] | null> {
  const r = await runner('ip', ['-j', `-${family}`, 'route', 'show', 'table', 'main']).catch(() => null);
  return r && r.code === 0 ? routesFromIpJson(r.stdout, family) : null;
}

/** The arrivals of both families, or undefined when the routes cannot be read. */
export async function readArrivals(runner: CommandRunner): Promise<Arrivals | undefined> {
  const [v4, v6] = await Promise.all([routesOf(runner, 4), routesOf(runner, 6)]);
  if (!v4 && !v6) return undefined;
  return arrivalsOf([...(v4 ?? []), ...(v6 ?? [])]);
}

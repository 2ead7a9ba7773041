/**
 * The route groups this node uses (issue 26), on the tunnel: the primary via node's peer carries the
 * group's prefixes in its allowed IPs (WireGuard sends a packet to the peer whose allowed IPs hold its
 * destination), and the kernel routes the prefixes into the interface (iproute2, `proto` ROUTE_PROTO so
 * this node's own routes are told from anyone else's). A group the node serves is not routed into
 * the tunnel here: its prefixes are behind this node.
 */
import type { Components, RouteGroup } from '@meshp/core';
import { run } from './exec.js';

/** The routes this plugin adds are marked with this routing protocol number (not in iproute2's rt_protos, so shown as a number). */
export const ROUTE_PROTO = '61';

/** Each peer's prefixes, as the primary (the first of `viaPeers`) of a group this node uses. */
export function routedPrefixes(c: Components): Map<string, string[]> {
  const self = c.declaration?.node ?? '';
  const out = new Map<string, string[]>();
  for (const g of c.routeGroups?.groups ?? []) {
    const primary = g.viaPeers[0];
    if (!primary || g.viaPeers.includes(self)) continue;
    out.set(primary, [...(out.get(primary) ?? []), ...g.prefixes].sort());
  }
  return out;
}

/** The groups this node is a via node of: its tunnel's forwarded path to their prefixes follows the policy (filter.ts). */
export function servedGroups(c: Components): RouteGroup[] {
  const self = c.declaration?.node ?? '';
  return (c.routeGroups?.groups ?? []).filter((g) => self && g.viaPeers.includes(self));
}

export const samePrefixes = (a: readonly string[] | undefined, b: readonly string[] | undefined): boolean => (a ?? []).join(',') === (b ?? []).join(',');

const family = (prefix: string): string => (prefix.includes(':') ? '-6' : '-4');

/** The prefixes routed into the interface by this plugin now (after a restart too: read from the kernel). */
export async function kernelRoutes(ifname: string): Promise<Set<string>> {
  const out = new Set<string>();
  for (const f of ['-4', '-6']) {
    const text = await run('ip', ['-j', f, 'route', 'show', 'dev', ifname, 'proto', ROUTE_PROTO]);
    for (const r of JSON.parse(text || '[]') as { dst: string }[]) out.add(r.dst.includes('/') ? r.dst : `${r.dst}/${f === '-4' ? 32 : 128}`);
  }
  return out;
}

/** Routes the wanted prefixes into the interface and takes away the ones no longer wanted. */
export async function setKernelRoutes(ifname: string, have: ReadonlySet<string>, wanted: ReadonlySet<string>): Promise<void> {
  for (const p of have) if (!wanted.has(p)) await run('ip', [family(p), 'route', 'del', p, 'dev', ifname, 'proto', ROUTE_PROTO]).catch(() => undefined);
  for (const p of wanted) if (!have.has(p)) await run('ip', [family(p), 'route', 'replace', p, 'dev', ifname, 'proto', ROUTE_PROTO]);
}

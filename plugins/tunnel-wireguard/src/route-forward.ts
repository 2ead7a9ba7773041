/**
 * A via node's forwarded paths as the firewall plugin is asked to open them (issue 26, ADR 0038):
 * per group this node serves, the mesh addresses of the peers a rule to `route:NAME` lets through,
 * with that rule's ports, to the group's prefixes, masqueraded unless the group says not. Asked only
 * where meshp may change the router (converged, or the `routing` module taken: forwarding.ts);
 * the tunnel's own table (filter.ts) enforces the same rules on the interface whatever the mode.
 */
import type { Components, Peer, RouteForward } from '@meshp/core';
import { hostRoute } from './peer-config.js';
import { parsePorts } from './ports.js';
import { servedGroups } from './routes.js';

export function routeForwards(c: Components, peers: Iterable<Peer>, iif: string): RouteForward[] {
  const served = servedGroups(c);
  if (!served.length) return [];
  const all = [...peers];
  const out: RouteForward[] = [];
  for (const g of served) {
    const allow: RouteForward['allow'] = [];
    for (const r of c.filter?.rules ?? []) {
      if (r.destinationTags[0] !== `route:${g.name}`) continue;
      const tags = new Set(r.sourceTags);
      const from = [...new Set(all.filter((p) => p.tags.some((t) => tags.has(t))).flatMap((p) => p.addresses.map(hostRoute)))].sort();
      if (from.length) allow.push({ from, ports: parsePorts(r.ports) });
    }
    out.push({ group: g.name, iif, to: [...g.prefixes], allow, masquerade: g.noMasquerade !== true });
  }
  return out.filter((f) => f.allow.length > 0);
}

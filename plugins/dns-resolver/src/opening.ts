/**
 * The resolver's port, declared like any module's: UDP and TCP from the mesh's private range only,
 * added to every plan so the firewall plugin opens it in the found firewall's own terms on an adopted
 * node and in the derived filter on a converged one; shown in the converge preview with the rest.
 */
import { resourceKey, toOpening, type Opening, type Plan, type Settings } from '@meshp/core';
import { parseRange } from '@meshp/core/net';

export const DNS_MODULE = 'dns';

export function dnsOpenings(port: number, privateRange: string): Opening[] {
  return (['udp', 'tcp'] as const).map((protocol) => toOpening(DNS_MODULE, { port, protocol, path: 'incoming', from: [privateRange] }));
}

/** The plan with the resolver's openings, unless the range is not known, no firewall plugin is there, or the firewall was refused. */
export function withDnsOpenings(plan: Plan, settings: Pick<Settings, 'privateRange'> | undefined, port: number, fallbackRange?: string): Plan {
  const range = settings?.privateRange || fallbackRange;
  if (!range) return plan;
  if (!plan.firewall.kind || plan.firewall.kind === 'none' || plan.actions.some((a) => a.kind === 'opening' && a.op === 'refuse')) return plan;
  const missing = dnsOpenings(port, range).filter((o) => !plan.firewall.openings.some((x) => x.id === o.id));
  if (missing.length === 0) return plan;
  return {
    ...plan,
    actions: [
      ...plan.actions,
      ...missing.map((o) => ({
        key: resourceKey('opening', o.id),
        kind: 'opening' as const,
        module: DNS_MODULE,
        op: 'create' as const,
        state: 'created' as const,
        spec: o,
        by: 'dns-resolver',
      })),
    ],
    firewall: { ...plan.firewall, openings: [...plan.firewall.openings, ...missing] },
  };
}

/** The mesh's range from a tunnel address with its prefix (`100.96.0.3/16` → `100.96.0.0/16`); undefined without one. */
export function meshRange(address: string | undefined): string | undefined {
  if (!address || !address.includes('/')) return undefined;
  try {
    return parseRange(address).text;
  } catch {
    return undefined;
  }
}

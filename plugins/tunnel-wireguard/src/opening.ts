/**
 * The tunnel's UDP port is a foundation port (catalogue module `tunnel`): a node that runs the
 * tunnel wants it reachable from anywhere (peers come from the underlay), whether or not the
 * operator assigned it the `tunnel` module. Added to every plan, so the firewall plugin opens it
 * like any opening: in the found firewall's own terms on an adopted node, in the derived filter on a
 * converged one (loaded with every reconcile's openings). Same id as the catalogue module's opening,
 * so a node that has the module is not given it twice.
 */
import { resourceKey, toOpening, type Plan, type Settings } from '@meshp/core';
import { DEFAULT_PORT } from './peer-config.js';

export function tunnelOpening(settings: Pick<Settings, 'ports'> | undefined, override?: number) {
  const port = override ?? settings?.ports?.['tunnel'] ?? DEFAULT_PORT;
  return toOpening('tunnel', { port, protocol: 'udp', path: 'incoming', from: [] });
}

/** The plan with the tunnel's opening, unless it has it already, no firewall plugin is there to open it, or the firewall was refused. */
export function withTunnelOpening(plan: Plan, settings: Pick<Settings, 'ports'> | undefined, override?: number): Plan {
  const o = tunnelOpening(settings, override);
  const key = resourceKey('opening', o.id);
  if (plan.actions.some((a) => a.key === key) || plan.firewall.openings.some((x) => x.id === o.id)) return plan;
  if (!plan.firewall.kind || plan.firewall.kind === 'none' || plan.actions.some((a) => a.kind === 'opening' && a.op === 'refuse')) return plan;
  return {
    ...plan,
    actions: [...plan.actions, { key, kind: 'opening', module: 'tunnel', op: 'create', state: 'created', spec: o, by: 'tunnel-wireguard' }],
    firewall: { ...plan.firewall, openings: [...plan.firewall.openings, o] },
  };
}

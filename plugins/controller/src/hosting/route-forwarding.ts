/**
 * What a route change does to each via node's forwarding (issue 26, ADR 0032), said in the change's
 * preview from the node's last report: a node that starts serving finds its `ip_forward` turned on
 * (converged: recorded first) or held (adopted: never changed, it forwards nothing until turned on);
 * a node that stops serving has what meshp turned on put back. The agent does it on its next plan.
 */
import type { ReportMessage, RouteGroup } from '@meshp/core';
import type { ForwardingChange } from '@meshp/protocol';

const V4 = 'net.ipv4.ip_forward';
const V6 = 'net.ipv6.conf.all.forwarding';

/** IPv6 forwarding only where a peer can send IPv6 through the tunnel (a member with an IPv6 mesh address): the agent's rule. */
const needed = (prefixes: readonly string[], v6Sources: boolean): string[] => [
  ...(prefixes.some((p) => !p.includes(':')) ? [V4] : []),
  ...(v6Sources && prefixes.some((p) => p.includes(':')) ? [V6] : []),
];

function starts(r: ReportMessage | null, prefixes: readonly string[], v6Sources: boolean): string {
  const f = r?.forwarding;
  if (!r || !f) return 'forwarding not reported (not connected, or an older agent): read and said on its next plan';
  const said = needed(prefixes, v6Sources).map((n) => {
    const v = f.values[n] ?? '';
    if (v === '1') return `${n}=1 found on: kept`;
    if (r.mode === 'converged') return `${n}=${v || '(none)'} found: recorded, then turned on (converged)`;
    return `${n}=${v || '(none)'} on an adopted node: held, never changed; it forwards nothing until it is turned on or the node converges`;
  });
  return said.join('; ');
}

function stops(r: ReportMessage | null): string {
  const f = r?.forwarding;
  if (f?.state !== 'owned') return 'stops serving: its forwarding left as found';
  const back = Object.entries(f.original).map(([n, v]) => `${n} put back to ${v}`);
  return `stops serving: ${back.join(', ') || 'what meshp turned on put back'} as found (unless another group it serves needs it)`;
}

/** Each via node whose serving changes from `before` to `after` (null: no such group), with what happens to its forwarding. */
export function forwardingChanges(
  before: RouteGroup | null,
  after: RouteGroup | null,
  report: (node: string) => ReportMessage | null,
  v6Sources = true,
): ForwardingChange[] {
  const was = new Set(before?.viaPeers ?? []);
  const out: ForwardingChange[] = [];
  for (const node of after?.viaPeers ?? []) {
    if (was.has(node) && needed(before!.prefixes, v6Sources).join() === needed(after!.prefixes, v6Sources).join()) continue;
    out.push({ node, change: starts(report(node), after!.prefixes, v6Sources) });
  }
  for (const node of was) if (!(after?.viaPeers ?? []).includes(node)) out.push({ node, change: stops(report(node)) });
  return out;
}

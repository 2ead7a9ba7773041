import type { UntakeStatus } from '@meshp/core/reconcile';
import type { Action, HostReport, Plan } from '@meshp/core';
import type { DnsResolverStatus } from '@meshp/dns-resolver';
import { table } from '../output.js';

const VERB: Record<Action['op'], string> = {
  create: 'create',
  converge: 'converge',
  hold: 'hold',
  keep: 'keep',
  remove: 'remove',
  release: 'leave',
  refuse: 'refuse',
};

export function renderPlan(plan: Plan): string {
  const changing = plan.actions.filter((a) => a.op === 'create' || a.op === 'converge' || a.op === 'remove');
  const head =
    `node ${plan.node} (${plan.mode})${plan.firewall.kind ? `, firewall ${plan.firewall.kind}` : ''}: ` +
    `${changing.length} change${changing.length === 1 ? '' : 's'}`;
  const rows = plan.actions.map((a) => [VERB[a.op], a.kind, a.key.slice(a.kind.length + 1), a.module, a.state, a.reason]);
  return `${head}\n${table(['ACTION', 'KIND', 'RESOURCE', 'MODULE', 'STATE', 'WHY'], rows)}`;
}

/** The mesh resolver's line (issue 25), from the report's `facts.dns` (the dns-resolver plugin's status); null without one. */
export function dnsLine(facts: Record<string, unknown>): string | null {
  const d = facts['dns'] as Partial<DnsResolverStatus> | undefined;
  if (!d || typeof d !== 'object') return null;
  const where = d.address
    ? `answers ${d.domain || 'the mesh'} on ${d.address}:${d.port} (${d.names ?? 0} names)`
    : `not answering${d.lastError ? `: ${d.lastError}` : ''}`;
  const up = d.upstreams?.length
    ? `forwards to ${d.upstreams.join(', ')} (${d.upstreamsFrom === 'found' ? "the machine's own" : 'the network DNS'})`
    : 'nowhere to forward to';
  const last = d.lastAnswerError ? `; last answer error: ${d.lastAnswerError}` : '';
  // An older agent says nothing of the manager: what it did is what every agent did then.
  const integration = d.integration || 'DNS not integrated: the resolver configuration is held';
  return `dns: ${where}, ${up}; ${integration}${last}`;
}

export function renderReport(report: HostReport): string {
  const fw = report.firewall ? `${report.firewall.kind}${report.firewall.active ? ' (active)' : ''}` : 'not probed';
  const counts =
    Object.entries(report.counts)
      .filter(([, n]) => n > 0)
      .map(([s, n]) => `${n} ${s}`)
      .join(', ') || 'nothing declared';
  const rows = report.resources.map((r) => [r.kind, r.key.slice(r.kind.length + 1), r.module, r.state, r.reason]);
  const dns = dnsLine(report.facts);
  return [
    `node ${report.node}  mode ${report.mode}${report.mode === 'adopted' ? ' (ADOPTED)' : ''}  firewall ${fw}  at ${report.at}`,
    counts,
    ...(dns ? [dns] : []),
    table(['KIND', 'RESOURCE', 'MODULE', 'STATE', 'WHY'], rows),
  ].join('\n');
}

/** Per module whose take changed something: whether untake can put it back, as the records tell. */
export function renderUntakeStatus(untake: UntakeStatus[]): string {
  if (untake.length === 0) return '';
  const lines = ['untake (from the records; `meshp host untake MODULE --preview` checks the machine):'];
  for (const u of untake) {
    const verdict = u.blockedBy.length > 0 ? 'REFUSED' : 'possible';
    lines.push(
      `  ${u.module}: ${verdict}; ${u.putBack.length} resource${u.putBack.length === 1 ? '' : 's'} to put back${u.interrupted ? `; ${u.interrupted}` : ''}`,
    );
    for (const b of u.blockedBy) lines.push(`    ${b}`);
  }
  return `${lines.join('\n')}\n`;
}

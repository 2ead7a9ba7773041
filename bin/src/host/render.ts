import type { UntakeStatus } from '@meshp/core/reconcile';
import type { Action, HostReport, Plan } from '@meshp/core';
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

export function renderReport(report: HostReport): string {
  const fw = report.firewall ? `${report.firewall.kind}${report.firewall.active ? ' (active)' : ''}` : 'not probed';
  const counts =
    Object.entries(report.counts)
      .filter(([, n]) => n > 0)
      .map(([s, n]) => `${n} ${s}`)
      .join(', ') || 'nothing declared';
  const rows = report.resources.map((r) => [r.kind, r.key.slice(r.kind.length + 1), r.module, r.state, r.reason]);
  return [
    `node ${report.node}  mode ${report.mode}${report.mode === 'adopted' ? ' (ADOPTED)' : ''}  firewall ${fw}  at ${report.at}`,
    counts,
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

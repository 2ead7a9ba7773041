/**
 * The host's report of one reconcile: each action's resource in the state it reached (refused when
 * its step failed, the firewall's verdict for an opening), the counts per state, the firewall found.
 */
import type { HostReport, Plan, ResourceReport } from '../contract/plan.js';
import type { ResourceState } from '../contract/model.js';
import { oneLine } from '../errors.js';
import type { Failure, InternalContext } from './context.js';

/** Every state counted from zero: a state added to ResourceState does not compile until it is here. */
const COUNTS_ZERO = {
  created: 0,
  owned: 0,
  held: 0,
  changed: 0,
  released: 0,
  pending: 0,
  refused: 0,
  unverified: 0,
} as const satisfies Record<ResourceState, 0>;

function resourceReports(plan: Plan, ctx: InternalContext, failures: Failure[]): ResourceReport[] {
  const failed = new Map(failures.map((f) => [f.key, f.error]));
  const resources: ResourceReport[] = [];
  for (const a of plan.actions) {
    // A removal that went through leaves nothing to report.
    if (a.op === 'remove' && !failed.has(a.key)) continue;
    const error = failed.get(a.key);
    const verdict = error ? undefined : ctx.verdicts.get(a.key);
    resources.push({
      key: a.key,
      kind: a.kind,
      module: a.module,
      state: error ? 'refused' : verdict ? verdict.state : a.state,
      ...(error ? { reason: error } : verdict ? { reason: verdict.reason } : a.reason ? { reason: a.reason } : {}),
    });
  }
  return resources;
}

function countStates(resources: ResourceReport[]): Record<ResourceState, number> {
  const counts: Record<ResourceState, number> = { ...COUNTS_ZERO };
  for (const r of resources) counts[r.state] += 1;
  return counts;
}

async function firewallFound(ctx: InternalContext): Promise<HostReport['firewall']> {
  if (!ctx.driver) return null;
  try {
    const d = await ctx.driver.describe();
    return { kind: d.kind, active: d.active, summary: d.summary };
  } catch (e) {
    return { kind: ctx.driver.kind, active: false, summary: [oneLine(e)] };
  }
}

export async function buildReport(plan: Plan, ctx: InternalContext, now: () => Date, failures: Failure[]): Promise<HostReport> {
  const resources = resourceReports(plan, ctx, failures);
  const counts = countStates(resources);
  const firewall = await firewallFound(ctx);
  const facts = ctx.firewallError ? { firewallError: ctx.firewallError } : {};
  return { node: plan.node, mode: plan.mode, at: now().toISOString(), firewall, resources, counts, facts };
}

/**
 * What the flip changes beyond the doors (issue 25): the actions plugins add to the converged plan
 * that are not openings — a converged node's `/etc/resolv.conf` the mesh will write, a resolver
 * manager's drop-in — listed in the converge preview like every other change, and covered by its id.
 * One function for the agent (from its plan) and the controller (from the agent's report), so both
 * compute the same preview.
 */
import type { Plan } from '../contract/plan.js';
import type { PlannedChange } from '../contract/transport.js';
import { canonicalJson, sha256 } from '../reconcile/handlers.js';

/** The ops that change something: keep, hold and refuse do not. */
const CHANGING = new Set(['create', 'converge', 'remove', 'release']);

/** A plugin's changes to the machine in a plan, in key order: what the flip will do that no module declares. */
export function pluginChangesOf(plan: Pick<Plan, 'actions'>): PlannedChange[] {
  return plan.actions
    .filter((a) => a.by && a.kind !== 'opening' && CHANGING.has(a.op))
    .map((a) => ({
      key: a.key,
      kind: a.kind,
      module: a.module,
      by: a.by!,
      op: a.op,
      reason: a.reason ?? '',
      // What it writes, not when: the same file to write is the same change.
      digest: sha256(canonicalJson(a.spec ?? null)).slice(0, 16),
    }))
    .sort((a, b) => a.key.localeCompare(b.key) || a.op.localeCompare(b.op));
}

const VERB: Record<string, string> = { create: 'create', converge: 'write', remove: 'remove', release: 'put back' };

/** The preview's step for a change: `write file /etc/resolv.conf (dns-resolver): why`. */
export function changeStep(c: PlannedChange): string {
  const [, what = c.key] = /^[a-z-]+:(.*)$/.exec(c.key) ?? [];
  return `${VERB[c.op] ?? c.op} ${c.kind} ${what} (${c.by})${c.reason ? `: ${c.reason}` : ''}`;
}

/** What of the changes the preview's id covers: all but the words (a reason reworded is the same change). */
export const changesForId = (changes: readonly PlannedChange[]) => changes.map((c) => [c.key, c.kind, c.module, c.by, c.op, c.digest] as const);

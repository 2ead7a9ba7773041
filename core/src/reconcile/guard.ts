/**
 * The guard: keep what you found. Checked after the plan is built and after plugins have added to
 * it, against the records and what was seen, independently of how the plan was made. An action that
 * would write or remove a held resource becomes a refusal, so no plugin and no bug in the planner
 * can modify or remove a held file.
 */
import type { Action, Plan } from '../contract/plan.js';
import type { Records, Seen } from './rule.js';

const TOUCHES = new Set<Action['op']>(['create', 'converge', 'remove']);

export interface GuardContext {
  mode: 'adopted' | 'converged';
  /** Assigned modules and whether each is taken; absent = unassigned. */
  taken: Map<string, boolean>;
  records: Records;
  seen: Map<string, Seen>;
}

/** Is this resource held: found (or recorded as found) and not yet the host's to change? */
export function isHeld(key: string, module: string, ctx: GuardContext): boolean {
  const { records } = ctx;
  if (records.owned.has(key)) return false;
  const converging = ctx.mode === 'converged' || ctx.taken.get(module) === true;
  if (records.originals.has(key)) return !converging;
  const seen = ctx.seen.get(key);
  const present = seen !== undefined && seen !== null && !(seen instanceof Error);
  if (!present) return false;
  const intent = records.intents.get(key);
  if (intent && intent.digest === seen.digest) return false;
  return !converging;
}

export function vetoReason(action: Action, ctx: GuardContext): string | null {
  if (action.op === 'remove' && ctx.records.originals.has(action.key)) {
    return 'MESHP_GUARD_VETO: a resource found on this machine is never removed';
  }
  if ((TOUCHES.has(action.op) || action.run) && isHeld(action.key, action.module, ctx)) {
    return `MESHP_GUARD_VETO: ${action.key} is held (found on an adopted node, module ${action.module} not taken); ${action.op} refused`;
  }
  return null;
}

/**
 * Files reached by more than one path: a declared file whose identity (device and inode) is also
 * another declared path's, or a recorded file's under another path. Declared keys are compared by
 * what was seen now; a record not declared any more, by the identity it was last seen with.
 */
export function aliased(ctx: GuardContext): Map<string, string> {
  const current = new Map<string, string>();
  for (const r of [...ctx.records.originals.values(), ...ctx.records.owned.values()]) {
    if (r.kind === 'file' && r.identity) current.set(r.key, r.identity);
  }
  const declared = new Set<string>();
  for (const [key, s] of ctx.seen) {
    if (!key.startsWith('file:')) continue;
    declared.add(key);
    if (s && !(s instanceof Error) && s.identity) current.set(key, s.identity);
    else current.delete(key);
  }
  const byIdentity = new Map<string, string[]>();
  for (const [key, id] of current) byIdentity.set(id, [...(byIdentity.get(id) ?? []), key]);
  const out = new Map<string, string>();
  for (const [id, keys] of byIdentity) {
    if (keys.length < 2) continue;
    const paths = keys.map((k) => k.slice('file:'.length)).sort();
    for (const k of keys) {
      if (declared.has(k)) out.set(k, `MESHP_FILE_ALIASED: ${paths.join(' and ')} are one file (device:inode ${id}); refused`);
    }
  }
  return out;
}

export function guard(plan: Plan, ctx: GuardContext): Plan {
  const aliases = aliased(ctx);
  const actions = plan.actions.map((a) => {
    const reason = aliases.get(a.key) ?? vetoReason(a, ctx);
    if (reason === null) return a;
    const { run: _run, spec: _spec, ...rest } = a;
    return { ...rest, op: 'refuse' as const, state: 'refused' as const, reason };
  });
  return { ...plan, actions };
}

/**
 * The reconciler's rule (docs/adr/0002-adopt-before-converge.md), as one pure function per resource: what is declared, what is
 * there, what the host's records say → one action. No I/O here.
 */
import type { IntentRecord, OriginalRecord, OwnedRecord } from '../contract/providers.js';
import type { Action } from '../contract/plan.js';
import { oneLine } from '../errors.js';
import type { Mode, ResourceKind } from '../contract/model.js';
import type { Observation } from './handlers.js';

export interface Declared {
  key: string;
  kind: ResourceKind;
  id: string;
  module: string;
  taken: boolean;
  spec: unknown;
  desired: string;
  createOnly: boolean;
}

export interface Records {
  owned: Map<string, OwnedRecord>;
  originals: Map<string, OriginalRecord>;
  intents: Map<string, IntentRecord>;
}

/** What was seen of a resource: absent (null), present, or unreadable (an error). */
export type Seen = Observation | null | Error;

function act(d: Pick<Declared, 'key' | 'kind' | 'module'>, op: Action['op'], state: Action['state'], extra: Partial<Action> = {}): Action {
  return { key: d.key, kind: d.kind, module: d.module, op, state, ...extra };
}

/** A declared resource of a module on a node. */
export function decide(d: Declared, seen: Seen, mode: Mode, records: Records): Action {
  if (seen instanceof Error) return act(d, 'refuse', 'refused', { reason: oneLine(seen) });
  const converging = mode === 'converged' || d.taken;
  const owned = records.owned.get(d.key);
  const original = records.originals.get(d.key);
  const intent = records.intents.get(d.key);
  const spec = d.spec;

  if (seen === null) {
    // Absent. A held resource that vanished was removed by something else: reported, not recreated.
    if (original && !owned && !converging) {
      return act(d, 'keep', 'changed', { reason: 'held, and removed by something else; not recreated until its module is taken' });
    }
    return act(d, 'create', 'created', { spec });
  }

  // Present. Is it the host's own? Its record says so, or an unfinished write of ours left exactly what we meant.
  const ours = owned !== undefined || (intent !== undefined && intent.digest === seen.digest);
  if (ours) {
    if (d.createOnly || seen.digest === d.desired) {
      return act(d, 'keep', 'owned', owned ? {} : { spec, reason: 'recovered an interrupted write' });
    }
    return act(d, 'converge', 'owned', { spec, reason: 'differs from its declaration' });
  }

  if (original) {
    if (converging) {
      if (d.createOnly || seen.digest === d.desired) return act(d, 'keep', 'owned', { spec, reason: 'taken; original kept' });
      return act(d, 'converge', 'owned', { spec, reason: 'taken; original kept' });
    }
    const changed = seen.fingerprint !== original.fingerprint;
    return act(d, 'hold', changed ? 'changed' : 'held', {
      reason: changed ? 'changed by something else since it was found; not reverted' : 'found; kept as it is until its module is taken',
    });
  }

  // Found: present, and no record says the host wrote it. Its original is recorded before anything else.
  if (converging) {
    if (d.createOnly || seen.digest === d.desired) return act(d, 'keep', 'owned', { spec, found: true, reason: 'found; original recorded' });
    return act(d, 'converge', 'owned', { spec, found: true, reason: 'found; original recorded, then converged' });
  }
  return act(d, 'hold', 'held', { found: true, reason: 'found; kept as it is until its module is taken' });
}

/** A resource the host has a record of, and which is no longer declared. */
export function decideUndeclared(key: string, kind: ResourceKind, module: string, records: Records): Action {
  const base = { key, kind, module };
  if (records.originals.has(key)) {
    return act(base, 'release', 'released', { reason: 'no longer declared; found on this machine, so left where it is' });
  }
  return act(base, 'remove', 'owned', { reason: 'the host made it and it is no longer declared' });
}

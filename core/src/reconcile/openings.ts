/**
 * Openings are state, not commands: every reconcile hands the firewall the whole wanted set and it
 * mends what a reload or reboot lost. An opening of a module still holding found resources on an
 * adopted node waits: the found firewall already serves the predecessor there, and the port is
 * opened for the mesh when the module is taken.
 */
import type { Action } from '../contract/plan.js';
import { resourceKey, toOpening, type Declaration, type Opening } from '../contract/model.js';

export interface OpeningPlan {
  actions: Action[];
  openings: Opening[];
  refusals: Opening[];
}

export function planOpenings(decl: Declaration, holding: Set<string>, present: Set<string> | null, refusedWith: string | null): OpeningPlan {
  const actions: Action[] = [];
  const openings: Opening[] = [];
  const refusals: Opening[] = [];
  const foundationPorts = new Set(Object.values(decl.settings.ports ?? {}));
  const privateRange = decl.settings.privateRange;
  for (const m of decl.modules) {
    const active = decl.mode === 'converged' || m.taken || !holding.has(m.name);
    for (const spec of m.openings ?? []) {
      const o = toOpening(m.name, spec);
      const base = { key: resourceKey('opening', o.id), kind: 'opening' as const, module: m.name };
      if (refusedWith !== null) {
        actions.push({ ...base, op: 'refuse', state: 'refused', reason: refusedWith });
        continue;
      }
      if (!active) {
        actions.push({ ...base, op: 'keep', state: 'pending', reason: 'module not taken; its found resources still serve through the found firewall' });
        continue;
      }
      openings.push(o);
      const there = present?.has(o.id) ?? false;
      actions.push({ ...base, op: there ? 'keep' : 'create', state: there ? 'owned' : 'created', spec: o });
      if (o.path === 'forwarded' && privateRange && foundationPorts.has(o.port)) {
        // The mesh protects its own ports itself: dropped on the forwarded path from outside the private network.
        refusals.push({ ...o, id: `${o.id}/refuse`, from: [], except: [privateRange], action: 'drop' });
      }
    }
  }
  return { actions, openings, refusals };
}

/**
 * A node's declaration is built from the catalogue modules it is assigned, their placeholders
 * (`{{ports.NAME}}`, `{{privateRange}}`) filled from the node's own settings. A module naming a
 * setting the node lacks cannot be filled: sent unfilled, a port placeholder is a string where the
 * wire carries a number, the delta does not encode, and the agent reconnects into the same failure
 * for ever (issue 33). So every change that brings a module to a node (assign, take, a module
 * redefined) is checked here first, and refused with the setting named: such a declaration is
 * never stored.
 */
import { MeshpError } from '@meshp/core';
import { missingSettings } from '@meshp/core/catalogue';
import { declarationFor, declarationFromWire, type MemberRecord, type ModuleDef } from '@meshp/core/delta';
import { validateDeclaration } from '@meshp/core/reconcile';

const settingsShown = (m: MemberRecord): string => {
  const names = [...Object.keys(m.settings.ports).map((p) => `ports.${p}`), ...(m.settings.privateRange ? ['privateRange'] : [])];
  return names.length ? names.join(', ') : 'none';
};

function checkFilled(node: MemberRecord, name: string, def: ModuleDef): void {
  const missing = missingSettings(def, node.settings);
  if (missing.length === 0) return;
  const one = missing.length === 1;
  throw new MeshpError(
    'MESHP_SETTING_MISSING',
    `module ${name} names ${missing.map((s) => `{{${s}}}`).join(', ')}, and node ${node.id} has no ${one ? 'setting' : 'settings'} ${missing.join(', ')} (its settings: ${settingsShown(node)}): its declaration could not be sent, so nothing was changed`,
    { details: { module: name, node: node.id, missing } },
  );
}

/** The declaration as the agent checks it: what it would refuse is not stored either. */
function checkValid(node: MemberRecord, moduleOf: (name: string) => ModuleDef | null, what: string): void {
  try {
    validateDeclaration(declarationFromWire(declarationFor(node, moduleOf)));
  } catch (e) {
    const why = e instanceof MeshpError ? e.oneLine() : String(e);
    throw new MeshpError('MESHP_DECLARATION_INVALID', `node ${node.id}'s declaration with ${what} would not be valid: ${why}; nothing was changed`, {
      cause: e,
    });
  }
}

/** Refuses (MESHP_SETTING_MISSING, MESHP_DECLARATION_INVALID) a node whose declaration, with its assigned modules, could not be sent. */
export function checkDeclarable(node: MemberRecord, moduleOf: (name: string) => ModuleDef | null): void {
  for (const name of node.assigned) {
    const def = moduleOf(name);
    if (def) checkFilled(node, name, def);
  }
  checkValid(node, moduleOf, node.assigned.join(', ') || 'no module');
}

/**
 * A module (re)defined: every node it is assigned to must be able to take it. Its placeholders are
 * looked up per node; the filled module is checked once per distinct set of settings (nodes share
 * them: the catalogue add of a module assigned to thousands of nodes checks a few declarations).
 */
export function checkDefinable(def: ModuleDef, nodes: Iterable<MemberRecord>): void {
  const seen = new Set<string>();
  for (const node of nodes) {
    if (!node.assigned.includes(def.name)) continue;
    checkFilled(node, def.name, def);
    const key = JSON.stringify(node.settings);
    if (seen.has(key)) continue;
    seen.add(key);
    checkValid({ ...node, assigned: [def.name], taken: [] }, (x) => (x === def.name ? def : null), `module ${def.name}`);
  }
}

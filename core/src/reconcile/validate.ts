/**
 * A declaration checked before anything on the machine is read: its shape by the one schema
 * (core/src/schema), then what a schema cannot say — no resource declared by two modules, no module
 * listed twice. Every refusal is coded and names the field; nothing else is thrown.
 */
import { MeshpError } from '../errors.js';
import { openingId, resourceKey, type Declaration } from '../model.js';
import { checkInput } from '../schema/check.js';
import { declarationSchema } from '../schema/declaration.js';
import { path as pathSchema } from '../schema/fields.js';

function fail(message: string): never {
  throw new MeshpError('MESHP_DECLARATION_INVALID', message);
}

/** An absolute path with no `.` or `..` segment: a path that could climb out of the root is refused before anything is read. */
export function checkPath(path: unknown, where: string): string {
  return checkInput(pathSchema, path, where, 'MESHP_PATH_INVALID');
}

/** Checks a declaration's shape before anything on the machine is read. Throws MESHP_DECLARATION_INVALID (or a path code). */
export function validateDeclaration(d: unknown): Declaration {
  const decl = checkInput(declarationSchema, d, 'declaration');
  const keys = new Map<string, string>();
  const names = new Set<string>();
  decl.modules.forEach((m) => {
    if (names.has(m.name)) fail(`module ${m.name} is listed twice`);
    names.add(m.name);
    const claim = (key: string) => {
      const other = keys.get(key);
      if (other !== undefined) fail(`${key} is declared by both module ${other} and module ${m.name}`);
      keys.set(key, m.name);
    };
    for (const f of m.files ?? []) claim(resourceKey('file', f.path));
    for (const c of m.containers ?? []) claim(resourceKey('container', c.name));
    for (const o of m.openings ?? []) claim(resourceKey('opening', openingId(m.name, o)));
  });
  const { $schema: _s, ...rest } = d as Declaration & { $schema?: string };
  return { ...rest, settings: { ...(rest.settings ?? {}), ports: rest.settings?.ports ?? {} } } as Declaration;
}

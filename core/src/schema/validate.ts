/**
 * A declaration checked before anything on the machine is read: its shape by the one schema
 * (declaration.ts), then what a schema cannot say — no resource declared by two modules (clash.ts),
 * no module listed twice. Every refusal is coded and names the field; nothing else is thrown.
 */
import { MeshpError } from '../errors.js';
import { openingId, type Declaration } from '../contract/model.js';
import { describeClash, findClash } from './clash.js';
import { checkInput } from './check.js';
import { declarationSchema } from './declaration.js';
import { path as pathSchema } from './fields.js';

/**
 * An opening's id travels in a firewall rule's comment ("meshp:" + id): nftables keeps 128 bytes of
 * it, so a longer id would pass here and fail in the driver after other resources were applied.
 */
export const OPENING_ID_MAX_BYTES = 122;
const bytes = (s: string): number => new TextEncoder().encode(s).length;

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
  const names = new Set<string>();
  decl.modules.forEach((m) => {
    if (names.has(m.name)) fail(`module ${m.name} is listed twice`);
    names.add(m.name);
    for (const [j, o] of (m.openings ?? []).entries()) {
      const id = openingId(m.name, o);
      if (bytes(id) > OPENING_ID_MAX_BYTES)
        fail(
          `declaration: modules.${m.name}.openings[${j}]: the opening id ${id.slice(0, 40)}… is longer than ${OPENING_ID_MAX_BYTES} bytes (a firewall comment carries it)`,
        );
    }
  });
  const clash = findClash(decl.modules);
  if (clash) fail(describeClash(clash));
  const { $schema: _s, ...rest } = d as Declaration & { $schema?: string };
  return { ...rest, settings: { ...(rest.settings ?? {}), ports: rest.settings?.ports ?? {} } } as Declaration;
}

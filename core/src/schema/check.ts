/**
 * Checking an input against its schema: bounds first (no stack overflow, no huge value), then the
 * schema; the first issue becomes one coded MeshpError that names the field ("modules[0].files[1].mode").
 */
import type { z } from 'zod';
import { CODES, MeshpError, type ErrorCode } from '../errors.js';

const isErrorCode = (c: string): c is ErrorCode => Object.hasOwn(CODES, c);
import { checkBounds } from './bounds.js';

function fieldOf(path: readonly PropertyKey[]): string {
  return path.map((k, i) => (typeof k === 'number' ? `[${k}]` : i === 0 ? String(k) : `.${String(k)}`)).join('') || '(the document)';
}

/** The input as the schema reads it, or a coded refusal naming the field. Never throws anything uncoded. */
export function checkInput<S extends z.ZodType>(schema: S, value: unknown, what: string, code: ErrorCode = 'MESHP_DECLARATION_INVALID'): z.output<S> {
  checkBounds(value, what, code);
  const r = schema.safeParse(value);
  if (r.success) return r.data;
  const issue = deepest(r.error.issues);
  const meshp = (issue as { params?: { meshp?: unknown } }).params?.meshp;
  const c = typeof meshp === 'string' && isErrorCode(meshp) ? meshp : code;
  // A key the schema does not know is named with the rest: "rulez" explains a missing "rules".
  const others = r.error.issues.filter((i) => i !== issue && i.code === 'unrecognized_keys').slice(0, 2);
  const more = others.map((i) => `; ${fieldOf(i.path)}: ${i.message}`).join('');
  throw new MeshpError(c, `${what}: ${fieldOf(issue.path)}: ${issue.message}${more}`);
}

type Issue = z.core.$ZodIssue;

/** Of a union's failures, the branch that got furthest names the field best. */
function deepest(issues: readonly Issue[]): Issue {
  let best = issues[0]!;
  for (const i of issues) {
    if (i.code === 'invalid_union' && 'errors' in i) {
      for (const branch of i.errors) {
        const d = deepest(branch.map((x) => ({ ...x, path: [...i.path, ...x.path] })) as Issue[]);
        if (d.path.length > best.path.length || best.code === 'invalid_union') best = d;
      }
    } else if (i.path.length > best.path.length) best = i;
  }
  return best;
}

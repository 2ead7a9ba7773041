/**
 * Size and depth bounds, checked before any schema looks at a value: walking a 10,000-level
 * object recursively overflows the stack, so this walk keeps its own stack and stops at the bound.
 */
import { MeshpError, type ErrorCode } from '../errors.js';

export interface Bounds {
  /** Nesting of objects and lists. */
  maxDepth: number;
  /** Values in all (objects, lists, strings, numbers …). */
  maxNodes: number;
  /** Characters of any one string. */
  maxString: number;
}

/** Far beyond any real declaration, module or policy; far below what would cost the controller. */
export const DEFAULT_BOUNDS: Bounds = { maxDepth: 16, maxNodes: 200_000, maxString: 4 * 1024 * 1024 };

/** Refuses a value deeper, larger or with longer strings than `bounds`, naming where. */
export function checkBounds(value: unknown, what: string, code: ErrorCode = 'MESHP_DECLARATION_INVALID', bounds: Bounds = DEFAULT_BOUNDS): void {
  const stack: [unknown, number, string][] = [[value, 0, '']];
  let nodes = 0;
  while (stack.length > 0) {
    const [v, depth, where] = stack.pop()!;
    if (++nodes > bounds.maxNodes) throw new MeshpError(code, `${what}: more than ${bounds.maxNodes} values`);
    if (typeof v === 'string') {
      if (v.length > bounds.maxString) throw new MeshpError(code, `${what}${where}: a string longer than ${bounds.maxString} characters`);
      continue;
    }
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= bounds.maxDepth) throw new MeshpError(code, `${what}${where}: nested deeper than ${bounds.maxDepth} levels`);
    if (Array.isArray(v)) v.forEach((x, i) => stack.push([x, depth + 1, `${where}[${i}]`]));
    else for (const [k, x] of Object.entries(v)) stack.push([x, depth + 1, `${where}.${k}`]);
  }
}

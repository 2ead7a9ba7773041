/**
 * What no schema of one module can say: two modules on one node claiming one resource — a file
 * path, a container name, an opening id, or a host port published by two containers. The agent
 * refuses such a declaration as a whole (schema/validate.ts); the controller refuses the assign
 * or the redefinition that would make one, so the clash is never stored.
 */
import { openingId, resourceKey, type ModuleDecl } from '../contract/model.js';

type ModuleLike = Pick<ModuleDecl, 'name' | 'files' | 'containers' | 'openings'>;

export interface Clash {
  /** The resource both claim, as the agent keys it ("file:/etc/x", "container:web", "port:tcp/8080"). */
  key: string;
  first: string;
  second: string;
}

/** The first resource claimed twice (by two modules, or twice by one), in declaration order; null when none. */
export function findClash(modules: readonly ModuleLike[]): Clash | null {
  const owners = new Map<string, string>();
  for (const m of modules) {
    const keys = [
      ...(m.files ?? []).map((f) => resourceKey('file', f.path)),
      ...(m.containers ?? []).map((c) => resourceKey('container', c.name)),
      ...(m.openings ?? []).map((o) => resourceKey('opening', openingId(m.name, o))),
      ...(m.containers ?? []).flatMap((c) => (c.ports ?? []).map((p) => `port:${p.protocol ?? 'tcp'}/${String(p.host)}`)),
    ];
    for (const key of keys) {
      const other = owners.get(key);
      if (other !== undefined) return { key, first: other, second: m.name };
      owners.set(key, m.name);
    }
  }
  return null;
}

export function describeClash(c: Clash): string {
  return c.first === c.second ? `${c.key} is declared twice by module ${c.first}` : `${c.key} is declared by both module ${c.first} and module ${c.second}`;
}

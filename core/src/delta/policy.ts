import type { MemberRecord, PolicyRule } from './records.js';

export const SCOPE = Object.freeze({ NONE: 0, REACH: 1, INBOUND_ONLY: 2 });
export type Scope = (typeof SCOPE)[keyof typeof SCOPE];

/** The policy indexed by tag, both ways. */
export class PolicyIndex {
  readonly #out = new Map<string, Set<string>>();
  readonly #in = new Map<string, Set<string>>();

  constructor(readonly rules: readonly PolicyRule[]) {
    for (const r of rules) {
      add(this.#out, r.from, r.to);
      add(this.#in, r.to, r.from);
    }
  }

  /** Tags the holder of `tags` may reach. */
  reachTags(tags: readonly string[]): Set<string> {
    return collect(this.#out, tags);
  }

  /** Tags whose holders may reach the holder of `tags`. */
  reachedByTags(tags: readonly string[]): Set<string> {
    return collect(this.#in, tags);
  }

  /** What `peer` is in `node`'s view: reachable, inbound only, or out of scope. */
  scope(node: MemberRecord, peer: MemberRecord): Scope {
    if (node.id === peer.id) return SCOPE.NONE;
    if (meets(this.#out, node.tags, peer.tags)) return SCOPE.REACH;
    if (meets(this.#in, node.tags, peer.tags)) return SCOPE.INBOUND_ONLY;
    return SCOPE.NONE;
  }

  /** The rules whose destination is one of these tags: who may reach the node. */
  inboundRules(tags: readonly string[]): PolicyRule[] {
    const mine = new Set(tags);
    return this.rules.filter((r) => mine.has(r.to));
  }
}

function add(m: Map<string, Set<string>>, k: string, v: string): void {
  let s = m.get(k);
  if (!s) m.set(k, (s = new Set()));
  s.add(v);
}

function collect(m: Map<string, Set<string>>, tags: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const t of tags) for (const u of m.get(t) ?? []) out.add(u);
  return out;
}

function meets(m: Map<string, Set<string>>, from: readonly string[], to: readonly string[]): boolean {
  for (const t of from) {
    const s = m.get(t);
    if (s) for (const u of to) if (s.has(u)) return true;
  }
  return false;
}

/** tag → members holding it: the candidates when a policy (or a node's own tags) moves scope. */
export class TagIndex {
  readonly #byTag = new Map<string, Set<string>>();

  add(m: MemberRecord): void {
    for (const t of m.tags) add(this.#byTag, t, m.id);
  }

  remove(m: MemberRecord): void {
    for (const t of m.tags) this.#byTag.get(t)?.delete(m.id);
  }

  members(tag: string): Iterable<string> {
    return this.#byTag.get(tag) ?? [];
  }
}

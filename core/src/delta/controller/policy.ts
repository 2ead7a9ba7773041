import type { MemberRecord, PolicyRule } from './records.js';

export const SCOPE = Object.freeze({ NONE: 0, REACH: 1, INBOUND_ONLY: 2 });
export type Scope = (typeof SCOPE)[keyof typeof SCOPE];

/**
 * The tag genesis gives the control-node. It carries the mesh's own rule, which no policy can take
 * away: every member has the control-node in its view as a peer it may reach, and the control-node
 * has every member in its view, inbound only unless a rule lets it reach that member. So every node
 * has a tunnel to the store, registry, bus and control (the tunnel's filter on the control-node opens
 * its foundation ports, and only them, to every peer in its view), and a policy change never
 * UNSCOPEs the control-node from a member. On a member nothing more is opened to the control-node
 * than the policy's rules allow: its filter component is the rules to its own tags, as before.
 */
export const CONTROL_NODE_TAG = 'control-node';

/** Whether the holder of these tags is a control-node (see CONTROL_NODE_TAG). */
export function isControlNode(tags: readonly string[]): boolean {
  return tags.includes(CONTROL_NODE_TAG);
}

/** The policy indexed by tag, both ways. */
export class PolicyIndex {
  readonly #out = new Map<string, Set<string>>();
  readonly #in = new Map<string, Set<string>>();
  /** destination tag → the positions of its rules: a node's inbound rules without a pass over every rule. */
  readonly #byTo = new Map<string, number[]>();

  constructor(readonly rules: readonly PolicyRule[]) {
    rules.forEach((r, i) => {
      add(this.#out, r.from, r.to);
      add(this.#in, r.to, r.from);
      const at = this.#byTo.get(r.to);
      if (at) at.push(i);
      else this.#byTo.set(r.to, [i]);
    });
  }

  /** Tags the holder of `tags` may reach: the control-node's always (the mesh's own rule). */
  reachTags(tags: readonly string[]): Set<string> {
    return collect(this.#out, tags).add(CONTROL_NODE_TAG);
  }

  /** Tags whose holders may reach the holder of `tags` by a rule (a control-node is reached by every member: not listed here). */
  reachedByTags(tags: readonly string[]): Set<string> {
    return collect(this.#in, tags);
  }

  /** What `peer` is in `node`'s view: reachable, inbound only, or out of scope; a control-node is always in it. */
  scope(node: MemberRecord, peer: MemberRecord): Scope {
    // An expired node is out of every peer's view (ADR 0041): removed for traffic, still a member.
    if (node.id === peer.id || peer.expiredAt) return SCOPE.NONE;
    if (meets(this.#out, node.tags, peer.tags) || isControlNode(peer.tags)) return SCOPE.REACH;
    if (meets(this.#in, node.tags, peer.tags) || isControlNode(node.tags)) return SCOPE.INBOUND_ONLY;
    return SCOPE.NONE;
  }

  /** The rules whose destination is one of these tags: who may reach the node. */
  inboundRules(tags: readonly string[]): PolicyRule[] {
    const at = new Set<number>();
    for (const t of tags) for (const i of this.#byTo.get(t) ?? []) at.add(i);
    return [...at].sort((a, b) => a - b).map((i) => this.rules[i]!);
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

/**
 * Where an opening goes in one base chain of a found firewall: the one placement rule both
 * firewall plugins follow. An opening only widens the found firewall's catch-all denial of its
 * traffic (new connections from its range to its port, on its path). So it goes after every rule
 * that denies a *part* of that traffic — a source ban, a blocklist, `ct state invalid`, a rate
 * limit, a jump to a chain that may drop some packets and return — and before the first rule that
 * drops *all* of it (a bare drop or reject, a jump to a chain that ends in one); when only the
 * policy drops it, at the end. The mesh never writes into the found firewall's regular chains, so
 * a jump to a chain that drops part of the traffic and then all of it leaves no place: refused.
 */
import type { Door } from '../contract/providers.js';
import type { ReachChain, ReachRule } from './reach.js';
import { matchOf, possibleOf } from './reach.js';
import { intersect, isEmpty, subtract, wholeOf, type AddressSet } from './spans.js';

export type Placement =
  /** Nothing in the chain drops all of the traffic: the chain needs no opening. */
  | { kind: 'none' }
  /**
   * Insert before rule `index` (0-based in the chain's rules); `after`: the last partial denial
   * above it (or the base chain's drop of every invalid packet, invalidDropAbove), or -1.
   * `invalid`: the found chain denies packets in conntrack state invalid (see deniesInvalid) and
   * drops none of them above the place: the accept must not take them either (`ct state != invalid`).
   */
  | { kind: 'before'; index: number; after: number; invalid?: boolean }
  /** Only the policy drops all of it: append; `after` and `invalid` as above. */
  | { kind: 'end'; after: number; invalid?: boolean }
  /** No position honours both sides: the rule that leaves none, and why. */
  | { kind: 'refused'; rule: string; why: string };

const MAX_DEPTH = 16;

/** What a walk of a chain found for the traffic entering it. */
interface Scan {
  /** The first rule that denies part of the traffic, if any (its label). */
  partial: string | null;
  /** Index of the last such rule in this chain (-1: none). */
  lastPartial: number;
  /** Index and label of the first rule that drops all the traffic still walking, if any. */
  total: { index: number; rule: string } | null;
  /** A jump target that mixes partial and total denials: no position for an accept. */
  conflict?: { rule: string; why: string };
  /** What may fall off the end (or return): empty when a total drop ends the walk. */
  rest: AddressSet;
}

function labelOf(rule: ReachRule, chain: string, i: number): string {
  return rule.label ?? `rule ${i + 1} of ${chain}`;
}

/** Where a walk is: the chain it is in, the whole chain set, the door, how deep in jumps. */
interface Where {
  chainName: string;
  chain: ReachChain;
  door: Door;
  depth: number;
}

/** The walk so far through one chain: what is still walking, and the partial denials met. */
interface Walk {
  left: AddressSet;
  partial: string | null;
  lastPartial: number;
  /**
   * An unreadable return was met (a `-m hashlimit … -j RETURN`, nft's `limit rate … return`):
   * some unknown part of the traffic has left, so no rule below drops *all* of it any more — a
   * drop after it denies the rest in part (a rate limit: what is over it), not the whole.
   */
  leaky?: boolean;
}

/** A rule that may meet what is still walking, with what it matches of it. */
interface Met {
  rule: ReachRule;
  i: number;
  label: string;
  possible: AddressSet;
  definite: AddressSet | null;
  /** It surely matches all that is still walking. */
  covers: boolean;
}

function finish(w: Walk, s: Partial<Scan>): Scan {
  return { partial: w.partial, lastPartial: w.lastPartial, total: null, rest: w.left, ...s };
}

function deniesPart(w: Walk, m: Met): void {
  w.partial ??= m.label;
  w.lastPartial = m.i;
}

/**
 * A rule on an interface (read as the sources arriving on it) that splits what is still walking:
 * the opening's range comes in partly on that interface and partly elsewhere, and the rule treats
 * the two apart (a per-interface dispatch). One accept cannot stand on both sides of it: refused,
 * so the operator gives the opening a range that arrives on one interface.
 */
function interfaceSplit(w: Walk, m: Met): Scan | null {
  const a = m.rule.arrives;
  if (!a || isEmpty(intersect(w.left, a)) || isEmpty(subtract(w.left, a))) return null;
  return finish(w, {
    conflict: {
      rule: m.label,
      why: "the opening's range arrives partly on the interface it names and partly on others (by the routes back to it), and it treats them apart; give the opening a range that arrives on one interface",
    },
  });
}

/** A jump or goto: the target chain walked with what the rule sends there. */
function stepJump(w: Walk, m: Met, at: Where): Scan | null {
  const { rule, i, label, definite, possible, covers } = m;
  const target = rule.target ? at.chain.regular.get(rule.target) : undefined;
  if (!target || at.depth >= MAX_DEPTH) return null;
  const hit = intersect(w.left, definite ?? possible);
  const inner = scan(target, rule.target!, at.chain, hit, at.door, at.depth + 1);
  if (inner.conflict) return finish(w, { conflict: { rule: `${label} → ${inner.conflict.rule}`, why: inner.conflict.why } });
  if (inner.total || inner.partial) {
    const split = interfaceSplit(w, m);
    if (split) return split;
  }
  if (inner.total && inner.partial) {
    return finish(w, {
      conflict: {
        rule: label,
        why: `it leads to ${inner.partial}, which denies part of the traffic, and then to ${inner.total.rule}, which drops the rest; the mesh does not write into the found firewall's own chains`,
      },
    });
  }
  if (inner.total && covers) return finish(w, { total: { index: i, rule: `${label} (to ${inner.total.rule})` } });
  if (rule.verdict === 'goto' && !inner.total && !isEmpty(inner.rest)) {
    // What comes back from a goto leaves this chain at once: in a base chain it meets the
    // policy without passing any rule below, so an accept placed below never sees it.
    if (at.depth === 0 && at.chain.policy === 'drop') {
      return finish(w, { conflict: { rule: label, why: `what ${rule.target} does not decide falls to the policy drop without passing any rule below it` } });
    }
    if (covers) return finish(w, { partial: w.partial ?? inner.partial, lastPartial: inner.partial ? i : w.lastPartial, rest: inner.rest });
  }
  if (inner.total || inner.partial) deniesPart(w, m);
  if (definite && (inner.total || rule.verdict === 'goto')) w.left = subtract(w.left, definite);
  return null;
}

/** One rule met by what is still walking: the scan when the rule ends the walk, else null (the walk goes on). */
function stepRule(w: Walk, rule: ReachRule, i: number, at: Where): Scan | null {
  // The mesh's own rules are what is being placed.
  if (!rule.found || isEmpty(w.left)) return null;
  const possible = possibleOf(rule, at.door);
  if (!possible || isEmpty(intersect(w.left, possible))) return null;
  const definite = matchOf(rule, at.door);
  const covers = !w.leaky && definite !== null && isEmpty(subtract(w.left, definite));
  const m: Met = { rule, i, label: labelOf(rule, at.chainName, i), possible, definite, covers };
  if (rule.mayDrop) {
    deniesPart(w, m);
    return null;
  }
  if (rule.partial) deniesPart(w, m);
  switch (rule.verdict) {
    case 'accept':
      // A found accept is left to stand where it is: the opening is still placed, so it keeps
      // working when the found firewall narrows or drops its own accept.
      return null;
    case 'return':
      // What returns does not meet the rules below; an unreadable return lets some unknown part
      // go, so what follows it can only deny the rest in part (see Walk.leaky).
      if (definite) w.left = subtract(w.left, definite);
      else if (rule.opaque && !rule.notNew) w.leaky = true;
      return null;
    case 'drop':
      if (interfaceSplit(w, m)) return interfaceSplit(w, m);
      if (m.covers) return finish(w, { total: { index: i, rule: m.label } });
      deniesPart(w, m);
      // After an unreadable return the part that meets this drop is unknown: all may still walk on.
      if (definite && !w.leaky) w.left = subtract(w.left, definite);
      return null;
    case 'jump':
    case 'goto':
      return stepJump(w, m, at);
    case 'none':
      return null;
  }
}

function scan(rules: readonly ReachRule[], chainName: string, chain: ReachChain, entering: AddressSet, door: Door, depth: number): Scan {
  const w: Walk = { left: entering, partial: null, lastPartial: -1 };
  const at: Where = { chainName, chain, door, depth };
  for (let i = 0; i < rules.length; i++) {
    const done = stepRule(w, rules[i]!, i, at);
    if (done) return done;
  }
  return finish(w, {});
}

/**
 * Whether the found chain keeps packets in conntrack state invalid out: it drops them by name
 * (`ct state invalid drop`, a vmap's `invalid : drop`, `--ctstate INVALID -j DROP`), or its own
 * accepts of new connections take only valid ones (`ct state new accept`, as Debian's
 * workstation.nft: there a bare ACK to an open port falls to the catch-all drop). An opening
 * below such a chain's accepts widens its denial of new connections, not of invalid packets.
 * Read without the door: a chain's way with invalid packets is one for all its ports.
 */
export function deniesInvalid(chain: ReachChain): boolean {
  const seen = new Set<string>();
  const look = (rules: readonly ReachRule[], depth: number): boolean =>
    rules.some((r) => {
      if (!r.found || r.loopback) return false;
      if (r.invalid === 'matches' && (r.verdict === 'drop' || r.partial)) return true;
      if (r.invalid === 'skips' && r.verdict === 'accept' && !r.notNew) return true;
      if ((r.verdict === 'jump' || r.verdict === 'goto') && r.target && !seen.has(r.target) && depth < MAX_DEPTH) {
        seen.add(r.target);
        const target = chain.regular.get(r.target);
        return !!target && look(target, depth + 1);
      }
      return false;
    });
  return look(chain.rules, 0);
}

/**
 * Where an opening of `door` from `range` goes in one base chain (rules read by the plugin, the
 * mesh's own marked as not found).
 */
export function placeOpening(chain: ReachChain, door: Door, range: AddressSet): Placement {
  const entering = intersect(range, wholeOf(chain.families));
  if (isEmpty(entering)) return { kind: 'none' };
  const name = chain.label ?? 'the chain';
  const s = scan(chain.rules, name, chain, entering, door, 0);
  if (s.conflict) return { kind: 'refused', ...s.conflict };
  if (!s.total && !(chain.policy === 'drop' && !isEmpty(s.rest))) return { kind: 'none' };
  // Below a rule of the base chain that drops every invalid packet of this traffic, an accept sees
  // none: it needs no state match of its own, and stands below that rule.
  let after = s.lastPartial;
  let invalid = {};
  if (deniesInvalid(chain)) {
    const dropped = invalidDropAbove(chain, s.total ? s.total.index : chain.rules.length, door);
    if (dropped < 0) invalid = { invalid: true };
    else after = Math.max(after, dropped);
  }
  return s.total ? { kind: 'before', index: s.total.index, after, ...invalid } : { kind: 'end', after, ...invalid };
}

/**
 * The first rule of the base chain above `end` that drops every invalid packet of the door's
 * traffic: `ct state invalid drop` (`-m conntrack --ctstate INVALID -j DROP`) or a `ct state`
 * verdict map with `invalid : drop`, with no other match (an address, an interface, a port, a
 * protocol or a family narrows it to part of the traffic). Every packet that reaches a place below
 * it has passed it, whatever the rules above do. -1: none.
 */
export function invalidDropAbove(chain: ReachChain, end: number, door: Door): number {
  for (let i = 0; i < Math.min(end, chain.rules.length); i++) {
    const r = chain.rules[i]!;
    if (!r.found || r.loopback || r.opaque || r.mayDrop || r.invalid !== 'matches' || !(r.verdict === 'drop' || r.partial)) continue;
    if (r.sources || r.arrives || r.dport || r.origDport) continue;
    if (r.paths && !r.paths.includes(door.path)) continue;
    if (r.protocols && !r.protocols.includes(door.protocol)) continue;
    if (r.families && !chain.families.every((f) => r.families!.includes(f))) continue;
    return i;
  }
  return -1;
}

/**
 * The ports a chain tells apart: two ports of one class meet every rule of the chain (and of the
 * chains it can jump to) alike, since a rule sees a port only through its port ranges, so an opening
 * is placed alike for both. The class of a port is how many range bounds lie at or below it.
 * A plan of 1,000 openings on 1,000 ports places once per class, not once per port.
 */
export function portClasses(chain: ReachChain): (port: number) => number {
  const bounds = new Set<number>();
  const add = (rules: readonly ReachRule[]) => {
    for (const r of rules) {
      for (const m of [r.dport, r.origDport]) {
        for (const [lo, hi] of m?.ranges ?? []) bounds.add(lo).add(hi + 1);
      }
    }
  };
  add(chain.rules);
  for (const rules of chain.regular.values()) add(rules);
  const sorted = Float64Array.from(bounds).sort();
  return (port) => {
    let lo = 0;
    let hi = sorted.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (sorted[mid]! <= port) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  };
}

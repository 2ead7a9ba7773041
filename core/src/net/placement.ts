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
   * above it, or -1. `invalid`: the found chain denies packets in conntrack state invalid (see
   * deniesInvalid): the accept must not take them either (`ct state != invalid`).
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

function scan(rules: readonly ReachRule[], chainName: string, chain: ReachChain, entering: AddressSet, door: Door, depth: number): Scan {
  let left = entering;
  let partial: string | null = null;
  let lastPartial = -1;
  const out = (s: Partial<Scan>): Scan => ({ partial, lastPartial, total: null, rest: left, ...s });
  for (let i = 0; i < rules.length; i++) {
    const rule = rules[i]!;
    // The mesh's own rules are what is being placed.
    if (!rule.found || isEmpty(left)) continue;
    const possible = possibleOf(rule, door);
    if (!possible || isEmpty(intersect(left, possible))) continue;
    const definite = matchOf(rule, door);
    const covers = definite !== null && isEmpty(subtract(left, definite));
    const label = labelOf(rule, chainName, i);
    const deniesPart = () => {
      partial ??= label;
      lastPartial = i;
    };
    if (rule.mayDrop) {
      deniesPart();
      continue;
    }
    if (rule.partial) deniesPart();
    switch (rule.verdict) {
      case 'accept':
        // A found accept is left to stand where it is: the opening is still placed, so it keeps
        // working when the found firewall narrows or drops its own accept.
        break;
      case 'return':
        // What returns does not meet the rules below (an unreadable return: some unknown part).
        if (definite) left = subtract(left, definite);
        break;
      case 'drop':
        if (covers) return out({ total: { index: i, rule: label } });
        deniesPart();
        if (definite) left = subtract(left, definite);
        break;
      case 'jump':
      case 'goto': {
        const target = rule.target ? chain.regular.get(rule.target) : undefined;
        if (!target || depth >= MAX_DEPTH) break;
        const hit = intersect(left, definite ?? possible);
        const inner = scan(target, rule.target!, chain, hit, door, depth + 1);
        if (inner.conflict) return out({ conflict: { rule: `${label} → ${inner.conflict.rule}`, why: inner.conflict.why } });
        if (inner.total && inner.partial) {
          return out({
            conflict: {
              rule: label,
              why: `it leads to ${inner.partial}, which denies part of the traffic, and then to ${inner.total.rule}, which drops the rest; the mesh does not write into the found firewall's own chains`,
            },
          });
        }
        if (inner.total && covers) return out({ total: { index: i, rule: `${label} (to ${inner.total.rule})` } });
        if (rule.verdict === 'goto' && !inner.total && !isEmpty(inner.rest)) {
          // What comes back from a goto leaves this chain at once: in a base chain it meets the
          // policy without passing any rule below, so an accept placed below never sees it.
          if (depth === 0 && chain.policy === 'drop') {
            return out({ conflict: { rule: label, why: `what ${rule.target} does not decide falls to the policy drop without passing any rule below it` } });
          }
          if (covers) return out({ partial: partial ?? inner.partial, lastPartial: inner.partial ? i : lastPartial, rest: inner.rest });
        }
        if (inner.total || inner.partial) deniesPart();
        if (definite && (inner.total || rule.verdict === 'goto')) left = subtract(left, definite);
        break;
      }
      case 'none':
        break;
    }
  }
  return out({});
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
  const invalid = deniesInvalid(chain) ? { invalid: true } : {};
  if (s.total) return { kind: 'before', index: s.total.index, after: s.lastPartial, ...invalid };
  if (chain.policy === 'drop' && !isEmpty(s.rest)) return { kind: 'end', after: s.lastPartial, ...invalid };
  return { kind: 'none' };
}

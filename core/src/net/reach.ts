/**
 * Where a door is reachable from, through a firewall's base chains as they are now. Firewall
 * plugins read their rules into this small shape (`ReachRule`); this walks them for one new
 * connection to the door. A packet passes a hook only when every base chain on it lets it through
 * (an accept ends one chain, a drop is final), so the answer is the intersection over the chains
 * of the sources each accepts. An approximation: a rule whose matches cannot be read (an
 * interface, a destination, a mark, a named set) is taken as matching nothing.
 */
import type { Door, Reach } from '../contracts.js';
import type { Protocol, TrafficPath } from '../model.js';
import {
  EVERYWHERE, NOWHERE, complement, intersect, isEmpty, isEverywhere, spansToSet, subtract, toCidrs, union, wholeOf,
  type AddressSet, type IpFamily, type Span,
} from './spans.js';

export interface PortMatch {
  /** Inclusive port ranges; a single port is [p, p]. */
  ranges: readonly (readonly [number, number])[];
  negate: boolean;
}

export interface ReachRule {
  /** What a match does: `none` for a rule without a verdict (a counter, a log). */
  verdict: 'accept' | 'drop' | 'return' | 'jump' | 'goto' | 'none';
  /** The regular chain of a jump or goto. */
  target?: string;
  /** Absent: both paths (`ct status dnat` matches only the forwarded one). */
  paths?: readonly TrafficPath[];
  /** Absent: any protocol. */
  protocols?: readonly Protocol[];
  /** Absent: every family the chain sees. */
  families?: readonly IpFamily[];
  /** The destination port the packet carries in this chain (on the forward path: after DNAT). */
  dport?: PortMatch;
  /** The connection's original destination port (`ct original proto-dst`, `--ctorigdstport`). */
  origDport?: PortMatch;
  sources?: { spans: readonly Span[]; negate: boolean };
  /** A match this reading cannot evaluate: the rule is taken as matching nothing. */
  opaque?: boolean;
  /** Matches only connections already under way (`ct state established,related`, invalid ones). */
  notNew?: boolean;
  /** A rule of the found firewall; the mesh's own rules do not count as mentioning a port. */
  found: boolean;
}

export interface ReachChain {
  policy: 'accept' | 'drop';
  /** The address families the chain sees (an `ip` table only IPv4). */
  families: readonly IpFamily[];
  rules: readonly ReachRule[];
  /** The regular chains a jump from this chain can reach (its table's). */
  regular: ReadonlyMap<string, readonly ReachRule[]>;
}

const MAX_DEPTH = 16;

function portIn(m: PortMatch, port: number): boolean {
  const inside = m.ranges.some(([lo, hi]) => lo <= port && port <= hi);
  return m.negate ? !inside : inside;
}

/** The destination port the rules see on the door's path. */
function seenPort(door: Door): number {
  return door.path === 'forwarded' ? (door.targetPort ?? door.port) : door.port;
}

/** The sources of a new connection to the door this rule matches, or null when it matches none. */
export function matchOf(rule: ReachRule, door: Door): AddressSet | null {
  if (rule.opaque || rule.notNew) return null;
  if (rule.paths && !rule.paths.includes(door.path)) return null;
  if (rule.protocols && !rule.protocols.includes(door.protocol)) return null;
  if (rule.dport && !portIn(rule.dport, seenPort(door))) return null;
  if (rule.origDport && !portIn(rule.origDport, door.port)) return null;
  const families = rule.families ?? (rule.sources ? [...new Set(rule.sources.spans.map((s) => s.family))] : null);
  let set = families ? wholeOf(families) : EVERYWHERE;
  if (rule.sources) {
    const named = spansToSet(rule.sources.spans);
    set = intersect(set, rule.sources.negate ? complement(named) : named);
  }
  return isEmpty(set) ? null : set;
}

/** Whether a found rule names the door's port (its own, or on the forward path the container's). */
export function mentions(rule: ReachRule, door: Door): boolean {
  if (!rule.found) return false;
  if (rule.protocols && !rule.protocols.includes(door.protocol)) return false;
  const named = (m: PortMatch | undefined, ports: number[]) => !!m && !m.negate && ports.some((p) => portIn(m, p));
  return named(rule.dport, [...new Set([door.port, seenPort(door)])]) || named(rule.origDport, [door.port]);
}

interface Walk {
  accepted: AddressSet;
  /** What falls off the end of the chain, or returns from it. */
  rest: AddressSet;
}

function walk(rules: readonly ReachRule[], chain: ReachChain, entering: AddressSet, door: Door, depth: number): Walk {
  let left = entering;
  let accepted = NOWHERE;
  let returned = NOWHERE;
  for (const rule of rules) {
    if (isEmpty(left)) break;
    const m = matchOf(rule, door);
    if (!m) continue;
    const hit = intersect(left, m);
    if (isEmpty(hit)) continue;
    switch (rule.verdict) {
      case 'accept':
        accepted = union(accepted, hit);
        left = subtract(left, hit);
        break;
      case 'drop':
        left = subtract(left, hit);
        break;
      case 'return':
        returned = union(returned, hit);
        left = subtract(left, hit);
        break;
      case 'jump':
      case 'goto': {
        const target = rule.target ? chain.regular.get(rule.target) : undefined;
        // An unknown target or a loop deeper than the kernel allows: as if the rule were not there.
        if (!target || depth >= MAX_DEPTH) break;
        const inner = walk(target, chain, hit, door, depth + 1);
        accepted = union(accepted, inner.accepted);
        left = subtract(left, hit);
        // After a jump what comes back goes on here; after a goto it goes where this chain returns to.
        if (rule.verdict === 'jump') left = union(left, inner.rest);
        else returned = union(returned, inner.rest);
        break;
      }
      case 'none':
        break;
    }
  }
  return { accepted, rest: union(left, returned) };
}

/** The sources one base chain lets through to the door. */
export function allowedBy(chain: ReachChain, door: Door): AddressSet {
  const seen = wholeOf(chain.families);
  const w = walk(chain.rules, chain, seen, door, 0);
  const passed = chain.policy === 'accept' ? union(w.accepted, w.rest) : w.accepted;
  // The families the chain does not see pass it untouched.
  return union(passed, subtract(EVERYWHERE, seen));
}

/** The door's reachability through every base chain on its path. */
export function reachThrough(chains: readonly ReachChain[], door: Door): Reach {
  let allowed = EVERYWHERE;
  for (const c of chains) allowed = intersect(allowed, allowedBy(c, door));
  const mentioned = chains.some((c) => c.rules.some((r) => mentions(r, door)) || [...c.regular.values()].some((rs) => rs.some((r) => mentions(r, door))));
  const base = { port: door.port, protocol: door.protocol, path: door.path, mentioned };
  if (isEverywhere(allowed)) return { ...base, now: 'open' };
  if (isEmpty(allowed)) return { ...base, now: 'closed' };
  return { ...base, now: 'open-from', from: toCidrs(allowed) };
}

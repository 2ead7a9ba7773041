/**
 * Where a door is reachable from, through a firewall's base chains as they are now. Firewall
 * plugins read their rules into this small shape (`ReachRule`); this walks them for one new
 * connection to the door. A packet passes a hook only when every base chain on it lets it through
 * (an accept ends one chain, a drop is final), so the answer is the intersection over the chains
 * of the sources each accepts. An approximation: a rule whose matches cannot be read (a
 * destination, a mark, an interface no route leaves by) is taken as matching nothing; an
 * interface match is read as the sources whose route back leaves by it (interfaces.ts).
 */
import type { Door, Reach } from '../contract/providers.js';
import type { Protocol, TrafficPath } from '../contract/model.js';
import {
  EVERYWHERE,
  NOWHERE,
  complement,
  intersect,
  isEmpty,
  isEverywhere,
  spansToSet,
  subtract,
  toCidrs,
  union,
  wholeOf,
  type AddressSet,
  type IpFamily,
  type Span,
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
  /**
   * An interface match read as the sources arriving on it (interfaces.ts: the routes back to
   * them): `-i ens3`, `iifname "pppoe-wan"`, negation applied. Absent: any interface.
   */
  arrives?: AddressSet;
  /** A match this reading cannot evaluate: the rule is taken as matching nothing. */
  opaque?: boolean;
  /** Matches only connections already under way (`ct state established,related`, invalid ones). */
  notNew?: boolean;
  /**
   * What its conntrack state match does with packets in state invalid (a bare ACK no connection
   * knows): `matches` (`ct state invalid`, a vmap entry `invalid : drop`), `skips` (`ct state new`,
   * `ct state != invalid`, `--ctstate NEW`). Absent: no state match.
   */
  invalid?: 'matches' | 'skips';
  /** A rule of the found firewall; the mesh's own rules do not count as mentioning a port. */
  found: boolean;
  /** Matches only the host's own traffic (`-i lo`, a loopback destination): never a new connection from a range. */
  loopback?: boolean;
  /** A rule without one verdict that can drop some packets (a verdict map with a drop in it). */
  mayDrop?: boolean;
  /** Besides its verdict for new connections, denies some packets of a connection (`ct state vmap { invalid : drop, … }`). */
  partial?: boolean;
  /** How an operator finds the rule (`-A INPUT -s … -j DROP`, `inet filter input handle 7`). */
  label?: string;
}

/** A found rule that drops some of a door's traffic, or cannot be read and may: with the sources it concerns. */
export interface RuleHit {
  rule: string;
  from: string[];
  /** A drop of part of what reached it (a ban, a blocklist): a denial an opening below it respects. */
  partial?: boolean;
}

export interface ReachChain {
  policy: 'accept' | 'drop';
  /** The address families the chain sees (an `ip` table only IPv4). */
  families: readonly IpFamily[];
  rules: readonly ReachRule[];
  /** The regular chains a jump from this chain can reach (its table's). */
  regular: ReadonlyMap<string, readonly ReachRule[]>;
  /** How an operator finds the chain (`INPUT`, `inet filter input`). */
  label?: string;
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
  return possibleOf(rule, door);
}

/**
 * The sources of the door's traffic a rule may match, reading only what it can: an unreadable
 * match or a conntrack state is taken as matching everything its readable parts allow.
 */
export function possibleOf(rule: ReachRule, door: Door): AddressSet | null {
  if (rule.loopback) return null;
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
  if (rule.arrives) set = intersect(set, rule.arrives);
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

/** Found rules that drop some of the door's traffic, and unreadable ones that may, as walked. */
interface Notes {
  dropped: { rule: string; set: AddressSet; partial?: boolean }[];
  unread: { rule: string; set: AddressSet }[];
}

/** Whether a jump's target chain (or one it jumps to) holds a rule that may drop. */
function targetMayDrop(rule: ReachRule, chain: ReachChain, depth: number): boolean {
  const rules = rule.target ? chain.regular.get(rule.target) : undefined;
  if (!rules || depth >= MAX_DEPTH) return false;
  return rules.some((r) => r.verdict === 'drop' || r.mayDrop || ((r.verdict === 'jump' || r.verdict === 'goto') && targetMayDrop(r, chain, depth + 1)));
}

function labelOf(rule: ReachRule): string {
  return rule.label ?? `a ${rule.verdict} rule`;
}

/** A rule the walk cannot read that may drop what is still walking: the answer is not certain. */
function noteUnread(rule: ReachRule, chain: ReachChain, door: Door, left: AddressSet, notes: Notes): void {
  if (!rule.found || !rule.opaque) return;
  if (!(rule.verdict === 'drop' || rule.mayDrop || ((rule.verdict === 'jump' || rule.verdict === 'goto') && targetMayDrop(rule, chain, 0)))) return;
  const p = possibleOf(rule, door);
  const maybe = p ? intersect(left, p) : NOWHERE;
  if (!isEmpty(maybe)) notes.unread.push({ rule: labelOf(rule), set: maybe });
}

function walk(rules: readonly ReachRule[], chain: ReachChain, entering: AddressSet, door: Door, depth: number, notes?: Notes): Walk {
  let left = entering;
  let accepted = NOWHERE;
  let returned = NOWHERE;
  // An unreadable return met (a rate limit's `-j RETURN`): which part of the traffic goes is not
  // known, so a drop below it denies some unknown part — a partial denial, noted with the return
  // as unread — and all of it is walked on as if it had returned.
  let leakyBy: string | null = null;
  for (const rule of rules) {
    if (isEmpty(left)) break;
    const m = matchOf(rule, door);
    if (!m && rule.found && rule.opaque && !rule.notNew && rule.verdict === 'return' && possibleOf(rule, door)) {
      leakyBy ??= labelOf(rule);
      continue;
    }
    if (!m) {
      if (notes) noteUnread(rule, chain, door, left, notes);
      continue;
    }
    const hit = intersect(left, m);
    if (isEmpty(hit)) continue;
    if (notes && rule.found && rule.mayDrop) notes.unread.push({ rule: labelOf(rule), set: hit });
    switch (rule.verdict) {
      case 'accept':
        accepted = union(accepted, hit);
        left = subtract(left, hit);
        break;
      case 'drop':
        if (leakyBy && rule.found) {
          if (notes) notes.dropped.push({ rule: labelOf(rule), set: hit, partial: true });
          if (notes) notes.unread.push({ rule: leakyBy, set: hit });
          returned = union(returned, hit);
          left = subtract(left, hit);
          break;
        }
        if (notes) notes.dropped.push({ rule: labelOf(rule), set: hit, ...(isEmpty(subtract(left, hit)) ? {} : { partial: true }) });
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
        const inner = walk(target, chain, hit, door, depth + 1, notes);
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
export function allowedBy(chain: ReachChain, door: Door, notes?: Notes): AddressSet {
  const seen = wholeOf(chain.families);
  const w = walk(chain.rules, chain, seen, door, 0, notes);
  const passed = chain.policy === 'accept' ? union(w.accepted, w.rest) : w.accepted;
  if (notes && chain.policy === 'drop' && !isEmpty(w.rest))
    notes.dropped.push({ rule: chain.label ? `${chain.label} policy drop` : 'the policy drop', set: w.rest });
  // The families the chain does not see pass it untouched.
  return union(passed, subtract(EVERYWHERE, seen));
}

/** The door's reachability through every base chain on its path. */
/** `explain`: also name the rules that drop some of the door's traffic, and those the walk cannot read that may. */
export function reachThrough(chains: readonly ReachChain[], door: Door, explain = false): Reach {
  let allowed = EVERYWHERE;
  const notes: Notes = { dropped: [], unread: [] };
  for (const c of chains) allowed = intersect(allowed, allowedBy(c, door, notes));
  const mentioned = chains.some((c) => c.rules.some((r) => mentions(r, door)) || [...c.regular.values()].some((rs) => rs.some((r) => mentions(r, door))));
  const hits = (xs: Notes['dropped']): RuleHit[] => xs.map((x) => ({ rule: x.rule, from: toCidrs(x.set), ...(x.partial ? { partial: true } : {}) }));
  const base = {
    port: door.port,
    protocol: door.protocol,
    path: door.path,
    mentioned,
    ...(explain ? { droppedBy: hits(notes.dropped), unread: hits(notes.unread) } : {}),
  };
  if (isEverywhere(allowed)) return { ...base, now: 'open' };
  if (isEmpty(allowed)) return { ...base, now: 'closed' };
  return { ...base, now: 'open-from', from: toCidrs(allowed) };
}

/**
 * One nft rule (as `nft -j` lists it) read as core's reach rule: each match by a reader of its
 * own kind, a verdict map as far as it can be read. A match it cannot read makes the rule opaque
 * (it matches nothing).
 */
import type { Protocol } from '@meshp/core';
import { arrivingOn, cidrSpan, complement, intersect, NOWHERE, union, type Arrivals, type PortMatch, type ReachRule, type Span } from '@meshp/core/net';
import type { Expr, NftRule } from './schema.js';
import { markKeyOf, markValues, sourcesMarked, type MarkAliases } from './marks.js';
import { readFlags, type Match } from './tcp-flags.js';

/** Statements that change nothing about which packets a rule matches. */
const INERT = new Set(['counter', 'log', 'mangle', 'notrack', 'set', 'continue']);

/** A number, a range, or a set of them; null when it is anything else (a named set, a service name). */
function ports(right: unknown): [number, number][] | null {
  if (typeof right === 'number') return [[right, right]];
  if (typeof right !== 'object' || right === null) return null;
  const o = right as { range?: unknown[]; set?: unknown[] };
  if (Array.isArray(o.range) && o.range.length === 2 && o.range.every((x) => typeof x === 'number')) return [[o.range[0] as number, o.range[1] as number]];
  if (Array.isArray(o.set)) {
    const parts = o.set.map(ports);
    return parts.every((p) => p !== null) ? (parts as [number, number][][]).flat() : null;
  }
  return null;
}

/** A table's named sets: name to the elements `nft -j` lists (absent: no elements). */
export type NamedSets = ReadonlyMap<string, unknown[]>;

function spans(right: unknown, sets?: NamedSets): Span[] | null {
  try {
    if (typeof right === 'string') {
      if (!right.startsWith('@')) return [cidrSpan(right)];
      // A named set is read as it holds now (the walk runs right after the write): the bans
      // fail2ban, sshguard or CrowdSec's bouncer hold there, also those with a timeout.
      const elements = sets?.get(right.slice(1));
      return elements ? spans({ set: elements }) : null;
    }
    if (typeof right !== 'object' || right === null) return null;
    // An element with a timeout, an expiry or a comment is listed as `{ elem: { val, timeout, expires, comment } }`:
    // until it expires (the kernel then drops it from the set) it matches as its value does.
    const elem = (right as { elem?: { val?: unknown } }).elem;
    if (elem && typeof elem === 'object') return elem.val === undefined ? null : spans(elem.val);
    const o = right as { prefix?: { addr: string; len: number }; range?: [string, string]; set?: unknown[] };
    if (o.prefix) return [cidrSpan(`${o.prefix.addr}/${o.prefix.len}`)];
    if (Array.isArray(o.range)) {
      const [a, b] = o.range.map((x) => cidrSpan(String(x)));
      return a && b ? [{ family: a.family, first: a.first, last: b.last }] : null;
    }
    if (Array.isArray(o.set)) {
      const parts = o.set.map((x) => spans(x));
      return parts.every((p) => p !== null) ? (parts as Span[][]).flat() : null;
    }
  } catch {
    // not an address nft would print: unreadable
  }
  return null;
}

function words(right: unknown): string[] | null {
  if (typeof right === 'string') return [right];
  if (Array.isArray(right) && right.every((x) => typeof x === 'string')) return right as string[];
  const set = (right as { set?: unknown } | null)?.set;
  return Array.isArray(set) && set.every((x) => typeof x === 'string') ? (set as string[]) : null;
}

const protocolsOf = (names: string[]): Protocol[] => names.filter((n): n is Protocol => n === 'tcp' || n === 'udp');

/** One match, as its reader sees it: the expression on its left by kind, the value on its right. */
interface MatchInput {
  payload?: Record<string, unknown>;
  meta?: Record<string, unknown>;
  ct?: Record<string, unknown>;
  right: unknown;
  /** `!=`. */
  negate: boolean;
  sets?: NamedSets;
  /** The sources arriving on each interface (core's interfaces.ts), when the routes were read. */
  arrivals?: Arrivals;
  /** The mark setters before this rule that can be read (marks.ts). */
  marks?: MarkAliases;
}

/** Reads one kind of match into the rule: undefined when the match is not of its kind, else whether it could be read. */
type MatchReader = (m: MatchInput, r: ReachRule) => boolean | undefined;

const inInterface: MatchReader = ({ meta, right, negate, arrivals }, r) => {
  if (!(meta && (meta.key === 'iif' || meta.key === 'iifname'))) return undefined;
  const names = words(right);
  if (!names) return false;
  // Only the host's own traffic comes in on lo: a rule on it never sees a range's new connection.
  if (names.length === 1 && names[0] === 'lo') {
    if (!negate) r.loopback = true;
    return true;
  }
  // Any other (fw4's `iifname "pppoe-wan"`, a set of them, `"eth*"`): the sources whose route back leaves by one.
  if (!arrivals || names.includes('lo')) return false;
  let set = NOWHERE;
  for (const n of names) {
    const s = arrivingOn(arrivals, n.endsWith('*') ? `${n.slice(0, -1)}+` : n, false);
    if (!s) return false;
    set = union(set, s);
  }
  const arrives = negate ? complement(set) : set;
  r.arrives = r.arrives ? intersect(r.arrives, arrives) : arrives;
  return true;
};

const packetType: MatchReader = ({ meta, right, negate }, r) => {
  if (meta?.key !== 'pkttype') return undefined;
  // The door's traffic is unicast to this host.
  const w = words(right);
  if (!w) return false;
  if (w.includes('host') === negate) r.loopback = true;
  return true;
};

const loopbackDestination: MatchReader = ({ payload, right, negate, sets }, r) => {
  if (!(payload && payload.field === 'daddr' && (payload.protocol === 'ip' || payload.protocol === 'ip6') && !negate)) return undefined;
  const s = spans(right, sets);
  const loop = payload.protocol === 'ip' ? cidrSpan('127.0.0.0/8') : cidrSpan('::1/128');
  if (s && s.every((x) => x.family === loop.family && x.first >= loop.first && x.last <= loop.last)) {
    r.loopback = true;
    return true;
  }
  return false;
};

const destinationPort: MatchReader = ({ payload, right, negate }, r) => {
  if (!(payload && payload.field === 'dport' && typeof payload.protocol === 'string')) return undefined;
  const p = ports(right);
  if (!p) return false;
  if (payload.protocol !== 'th') r.protocols = protocolsOf([payload.protocol]);
  r.dport = { ranges: p, negate } satisfies PortMatch;
  return true;
};

const sourceAddress: MatchReader = ({ payload, right, negate, sets }, r) => {
  if (!(payload && payload.field === 'saddr' && (payload.protocol === 'ip' || payload.protocol === 'ip6'))) return undefined;
  const s = spans(right, sets);
  // A second source match (a mark read as sources, then `ip saddr`) is not intersected here: unread.
  if (!s || r.sources) return false;
  r.families = [payload.protocol === 'ip' ? 4 : 6];
  r.sources = { spans: s, negate };
  return true;
};

const ipProtocol: MatchReader = ({ payload, right, negate }, r) => {
  if (!(payload && ((payload.protocol === 'ip' && payload.field === 'protocol') || (payload.protocol === 'ip6' && payload.field === 'nexthdr'))))
    return undefined;
  const w = words(right);
  if (!w || negate) return false;
  r.families = [payload.protocol === 'ip' ? 4 : 6];
  r.protocols = protocolsOf(w);
  return true;
};

const layer4Protocol: MatchReader = ({ meta, right, negate }, r) => {
  if (meta?.key !== 'l4proto') return undefined;
  const w = words(right);
  if (!w) return false;
  r.protocols = negate ? (['tcp', 'udp'] as Protocol[]).filter((p) => !w.includes(p)) : protocolsOf(w);
  return true;
};

const family: MatchReader = ({ meta, right, negate }, r) => {
  if (meta?.key !== 'nfproto') return undefined;
  const w = words(right);
  if (!w || negate) return false;
  r.families = w.flatMap((x) => (x === 'ipv4' ? [4 as const] : x === 'ipv6' ? [6 as const] : []));
  return true;
};

const connectionState: MatchReader = ({ ct, right, negate }, r) => {
  if (ct?.key !== 'state') return undefined;
  const w = words(right);
  if (!w) return false;
  // A new connection is in state new: a rule on other states only sees connections already under way.
  if (w.includes('new') === negate) r.notNew = true;
  r.invalid = w.includes('invalid') === negate ? 'skips' : 'matches';
  return true;
};

const connectionStatus: MatchReader = ({ ct, right, negate }, r) => {
  if (ct?.key !== 'status') return undefined;
  const w = words(right);
  if (!w || negate || !w.includes('dnat')) return false;
  r.paths = ['forwarded'];
  return true;
};

const originalPort: MatchReader = ({ ct, right, negate }, r) => {
  if (!(ct?.key === 'proto-dst' && ct.dir === 'original')) return undefined;
  const p = ports(right);
  if (!p) return false;
  r.origDport = { ranges: p, negate };
  return true;
};

const originalSource: MatchReader = ({ ct, right, negate, sets }, r) => {
  if (!(ct && ct.dir === 'original' && typeof ct.key === 'string' && /^(ip6? )?saddr$/.test(ct.key))) return undefined;
  const s = spans(right, sets);
  if (!s) return false;
  if (ct.key !== 'saddr') r.families = [ct.key === 'ip saddr' ? 4 : 6];
  r.sources = { spans: s, negate };
  return true;
};

/**
 * `meta mark` or `ct mark` after a setter by source map in the same chain (marks.ts): the sources
 * carrying the marks it names, both families (a family the map does not key carries mark 0).
 */
const packetMark: MatchReader = ({ meta, ct, right, negate, sets, marks }, r) => {
  const key = markKeyOf(meta ? { meta } : ct ? { ct } : null);
  if (!key) return undefined;
  const maps = marks?.[key];
  const holds = markValues(right, sets);
  if (!maps || !holds || r.sources) return false;
  r.sources = { spans: sourcesMarked(maps, holds), negate };
  r.families ??= [4, 6];
  return true;
};

/** In this order: the first reader of a match's kind reads it. */
const READERS: readonly MatchReader[] = [
  packetMark,
  inInterface,
  packetType,
  loopbackDestination,
  destinationPort,
  sourceAddress,
  ipProtocol,
  layer4Protocol,
  family,
  connectionState,
  connectionStatus,
  originalPort,
  originalSource,
];

/** Reads one match into the rule; false when it cannot be read. */
function readMatch(m: Match, r: ReachRule, sets?: NamedSets, arrivals?: Arrivals, marks?: MarkAliases): boolean {
  const flags = readFlags(m, r);
  if (flags !== undefined) return flags;
  const negate = m.op === '!=';
  if (m.op !== '==' && m.op !== 'in' && !negate) return false;
  const { payload, meta, ct } = m.left ?? {};
  for (const read of READERS) {
    const done = read({ payload, meta, ct, right: m.right, negate, sets, arrivals, marks }, r);
    if (done !== undefined) return done;
  }
  return false;
}

/** One rule as core's reach rule; a match it cannot read makes it opaque (it matches nothing). */
export function reachRule(rule: NftRule, found: boolean, sets?: NamedSets, arrivals?: Arrivals, marks?: MarkAliases): ReachRule {
  const r: ReachRule = { verdict: 'none', found };
  let limited = false;
  for (const e of rule.expr as Expr[]) {
    const kind = Object.keys(e)[0]!;
    if (kind === 'match') {
      if (!readMatch(e.match as Match, r, sets, arrivals, marks)) r.opaque = true;
    } else if (kind === 'accept') r.verdict = 'accept';
    else if (kind === 'drop' || kind === 'reject') r.verdict = 'drop';
    else if (kind === 'return') r.verdict = 'return';
    else if (kind === 'jump' || kind === 'goto') {
      r.verdict = kind;
      const target = (e[kind] as { target?: unknown } | null)?.target;
      if (typeof target === 'string') r.target = target;
    } else if (kind === 'limit') {
      // Under its rate a limit passes every packet (a new connection's pace); `limit rate over` only the excess: unread.
      if ((e.limit as { inv?: boolean } | null)?.inv) r.opaque = true;
      limited = true;
    } else if (kind === 'vmap') {
      readVmap(e.vmap as { key?: Match['left']; data?: unknown }, r);
    } else if (!INERT.has(kind)) {
      r.opaque = true;
    }
  }
  // A limit that returns is a rate limit (fw4's syn_flood: `limit rate … return`, then `drop`):
  // which part it lets go is unknown, so the rule is unread and core's placement counts the drop
  // below it as a partial denial. An accept, a log or a reject under a limit is read as meeting
  // every packet (at a new connection's pace it does: Arch's `limit rate 5/second reject`).
  if (limited && r.verdict === 'return') r.opaque = true;
  return r;
}

/** The verdict of a map entry: accept, drop, jump:chain …; null when it is not one. */
function entryVerdict(v: unknown): { verdict: ReachRule['verdict']; target?: string } | null {
  if (typeof v !== 'object' || v === null) return null;
  const k = Object.keys(v)[0];
  if (k === 'accept' || k === 'return') return { verdict: k };
  if (k === 'drop' || k === 'reject') return { verdict: 'drop' };
  if (k === 'jump' || k === 'goto') {
    const target = (v as Record<string, { target?: unknown }>)[k]?.target;
    return typeof target === 'string' ? { verdict: k, target } : null;
  }
  return null;
}

/**
 * A verdict map. On `ct state` a new connection takes the verdict mapped to `new` (NixOS:
 * `ct state vmap { invalid : drop, …, new : jump input-allow }`), and a drop mapped to another
 * state denies part of a connection's packets. On any other key the rule cannot be read: it is
 * opaque, and may drop when one of its verdicts does.
 */
function readVmap(vmap: { key?: Match['left']; data?: unknown } | undefined, r: ReachRule): void {
  const entries = (vmap?.data as { set?: unknown[] } | undefined)?.set;
  const pairs = Array.isArray(entries) ? entries.filter((x): x is [unknown, unknown] => Array.isArray(x) && x.length === 2) : [];
  const verdicts = pairs.map(([k, v]) => ({ keys: words(k) ?? [], v: entryVerdict(v) }));
  const anyDrop = verdicts.some((x) => x.v === null || x.v.verdict === 'drop' || x.v.verdict === 'jump' || x.v.verdict === 'goto');
  if (vmap?.key?.ct?.key === 'state' && verdicts.every((x) => x.v !== null)) {
    const forNew = verdicts.find((x) => x.keys.includes('new'))?.v;
    if (forNew) Object.assign(r, forNew);
    if (verdicts.some((x) => !x.keys.includes('new') && x.v!.verdict === 'drop')) r.partial = true;
    if (verdicts.some((x) => x.keys.includes('invalid') && x.v!.verdict === 'drop')) r.invalid = 'matches';
    return;
  }
  r.opaque = true;
  if (anyDrop) r.mayDrop = true;
}

/**
 * Where each door is reachable from now: the live ruleset's base chains on the door's hook, read
 * into core's reach rules and walked there. Only the tables that filter for this kind count — the
 * found firewall's and the mesh's own; Docker's and iptables-nft's tables are Docker's NAT doing
 * its job (a published port is forwarded by Docker unless one of those rules drops it), and the
 * iptables kinds answer for the rest of them.
 */
import type { Door, Protocol, Reach } from '@meshp/core';
import { cidrSpan, reachThrough, type IpFamily, type PortMatch, type ReachChain, type ReachRule, type Span } from '@meshp/core/net';
import { classifyTable, isMarked, type TableOwner } from './classify.js';
import { chainKey, tableKey, type Expr, type NftChain, type NftRule, type Ruleset } from './schema.js';

const COUNTED: readonly TableOwner[] = ['found', 'mesh', 'derived'];
const FAMILIES: Record<string, readonly IpFamily[]> = { ip: [4], ip6: [6], inet: [4, 6] };
/** Statements that change nothing about which packets a rule matches. */
const INERT = new Set(['counter', 'log', 'mangle', 'notrack', 'set', 'continue']);

type Match = { op?: unknown; left?: Record<string, Record<string, unknown>>; right?: unknown };

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

/** Reads one match into the rule; false when it cannot be read. */
function readMatch(m: Match, r: ReachRule, sets?: NamedSets): boolean {
  const negate = m.op === '!=';
  if (m.op !== '==' && m.op !== 'in' && !negate) return false;
  const { payload, meta, ct } = m.left ?? {};
  if (meta && (meta.key === 'iif' || meta.key === 'iifname') && typeof m.right === 'string') {
    // Only the host's own traffic comes in on lo: a rule on it never sees a range's new connection.
    if (m.right !== 'lo') return false;
    if (!negate) r.loopback = true;
    return true;
  }
  if (meta?.key === 'pkttype') {
    // The door's traffic is unicast to this host.
    const w = words(m.right);
    if (!w) return false;
    if (w.includes('host') === negate) r.loopback = true;
    return true;
  }
  if (payload && payload.field === 'daddr' && (payload.protocol === 'ip' || payload.protocol === 'ip6') && !negate) {
    const s = spans(m.right, sets);
    const loop = payload.protocol === 'ip' ? cidrSpan('127.0.0.0/8') : cidrSpan('::1/128');
    if (s && s.every((x) => x.family === loop.family && x.first >= loop.first && x.last <= loop.last)) {
      r.loopback = true;
      return true;
    }
    return false;
  }
  if (payload && payload.field === 'dport' && typeof payload.protocol === 'string') {
    const p = ports(m.right);
    if (!p) return false;
    if (payload.protocol !== 'th') r.protocols = protocolsOf([payload.protocol]);
    r.dport = { ranges: p, negate } satisfies PortMatch;
    return true;
  }
  if (payload && payload.field === 'saddr' && (payload.protocol === 'ip' || payload.protocol === 'ip6')) {
    const s = spans(m.right, sets);
    if (!s) return false;
    r.families = [payload.protocol === 'ip' ? 4 : 6];
    r.sources = { spans: s, negate };
    return true;
  }
  if (payload && ((payload.protocol === 'ip' && payload.field === 'protocol') || (payload.protocol === 'ip6' && payload.field === 'nexthdr'))) {
    const w = words(m.right);
    if (!w || negate) return false;
    r.families = [payload.protocol === 'ip' ? 4 : 6];
    r.protocols = protocolsOf(w);
    return true;
  }
  if (meta?.key === 'l4proto') {
    const w = words(m.right);
    if (!w) return false;
    r.protocols = negate ? (['tcp', 'udp'] as Protocol[]).filter((p) => !w.includes(p)) : protocolsOf(w);
    return true;
  }
  if (meta?.key === 'nfproto') {
    const w = words(m.right);
    if (!w || negate) return false;
    r.families = w.flatMap((x) => (x === 'ipv4' ? [4 as const] : x === 'ipv6' ? [6 as const] : []));
    return true;
  }
  if (ct?.key === 'state') {
    const w = words(m.right);
    if (!w) return false;
    // A new connection is in state new: a rule on other states only sees connections already under way.
    if (w.includes('new') === negate) r.notNew = true;
    r.invalid = w.includes('invalid') === negate ? 'skips' : 'matches';
    return true;
  }
  if (ct?.key === 'status') {
    const w = words(m.right);
    if (!w || negate || !w.includes('dnat')) return false;
    r.paths = ['forwarded'];
    return true;
  }
  if (ct?.key === 'proto-dst' && ct.dir === 'original') {
    const p = ports(m.right);
    if (!p) return false;
    r.origDport = { ranges: p, negate };
    return true;
  }
  if (ct && ct.dir === 'original' && typeof ct.key === 'string' && /^(ip6? )?saddr$/.test(ct.key)) {
    const s = spans(m.right, sets);
    if (!s) return false;
    if (ct.key !== 'saddr') r.families = [ct.key === 'ip saddr' ? 4 : 6];
    r.sources = { spans: s, negate };
    return true;
  }
  return false;
}

/** One rule as core's reach rule; a match it cannot read makes it opaque (it matches nothing). */
export function reachRule(rule: NftRule, found: boolean, sets?: NamedSets): ReachRule {
  const r: ReachRule = { verdict: 'none', found };
  for (const e of rule.expr as Expr[]) {
    const kind = Object.keys(e)[0]!;
    if (kind === 'match') {
      if (!readMatch(e.match as Match, r, sets)) r.opaque = true;
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
    } else if (kind === 'vmap') {
      readVmap(e.vmap as { key?: Match['left']; data?: unknown }, r);
    } else if (!INERT.has(kind)) {
      r.opaque = true;
    }
  }
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

/** How an operator finds a rule: its chain and handle, and what it does. */
function labelOf(rule: NftRule): string {
  const verdict = rule.expr.map((e) => Object.keys(e)[0]).filter((k) => !['match', 'counter', 'log'].includes(k!)).join(' ');
  const target = jumpTargetOf(rule);
  return `${rule.family} ${rule.table} ${rule.chain} handle ${rule.handle ?? '?'} (${verdict || 'no verdict'}${target ? ` ${target}` : ''})`;
}

function jumpTargetOf(rule: NftRule): string | null {
  for (const e of rule.expr) {
    const v = (e.jump ?? e.goto) as { target?: unknown } | undefined;
    if (v && typeof v.target === 'string') return v.target;
  }
  return null;
}

/** The named sets of one table (by its key), from the listed objects. */
export function setsOf(rs: Ruleset, table: string): NamedSets {
  const out = new Map<string, unknown[]>();
  for (const o of rs.objects) {
    const set = (o as { set?: { family: string; table: string; name: string; elem?: unknown[] } }).set;
    if (set && tableKey(set as { family: string; table?: string; name: string }) === table) out.set(set.name, set.elem ?? []);
  }
  return out;
}

/** One base chain of a found table as core's reach chain, the mesh's own rules not counted as found. */
export function reachChainOf(rs: Ruleset, chain: NftChain): ReachChain {
  const t = tableKey(chain);
  const rulesByChain = new Map<string, NftRule[]>();
  for (const r of rs.rules) {
    if (tableKey(r) !== t) continue;
    if (!rulesByChain.has(r.chain)) rulesByChain.set(r.chain, []);
    rulesByChain.get(r.chain)!.push(r);
  }
  const sets = setsOf(rs, t);
  const read = (name: string) => (rulesByChain.get(name) ?? []).map((r) => ({ ...reachRule(r, !isMarked(r), sets), label: labelOf(r) }));
  const regular = new Map<string, readonly ReachRule[]>();
  for (const c of rs.chains) if (tableKey(c) === t && !c.hook) regular.set(c.name, read(c.name));
  return { policy: chain.policy ?? 'accept', families: FAMILIES[chain.family] ?? [4, 6], rules: read(chain.name), regular, label: chainKey(chain) };
}

/** The base chains on `hook` of the tables that count, read once per ruleset. */
export function reachChains(rs: Ruleset, hook: 'input' | 'forward'): ReachChain[] {
  const counted = new Map(rs.tables.filter((t) => COUNTED.includes(classifyTable(t, rs))).map((t) => [tableKey(t), classifyTable(t, rs)]));
  const setCache = new Map<string, NamedSets>();
  const setsByTable = (t: string) => setCache.get(t) ?? setCache.set(t, setsOf(rs, t)).get(t)!;
  const byChain = new Map<string, NftRule[]>();
  for (const r of rs.rules) {
    if (!counted.has(tableKey(r))) continue;
    const k = chainKey(r);
    if (!byChain.has(k)) byChain.set(k, []);
    byChain.get(k)!.push(r);
  }
  const read = (c: NftChain) =>
    (byChain.get(chainKey(c)) ?? []).map((r) => ({ ...reachRule(r, counted.get(tableKey(r)) === 'found' && !isMarked(r), setsByTable(tableKey(r))), label: labelOf(r) }));
  const regular = new Map<string, Map<string, readonly ReachRule[]>>();
  for (const c of rs.chains) {
    if (!counted.has(tableKey(c)) || c.hook) continue;
    const t = tableKey(c);
    if (!regular.has(t)) regular.set(t, new Map());
    regular.get(t)!.set(c.name, read(c));
  }
  return rs.chains
    .filter((c) => counted.has(tableKey(c)) && c.hook === hook && (c.type ?? 'filter') === 'filter' && FAMILIES[c.family])
    .map((c) => ({ policy: c.policy ?? 'accept', families: FAMILIES[c.family]!, rules: read(c), regular: regular.get(tableKey(c)) ?? new Map(), label: chainKey(c) }));
}

/** Each door's reach through the ruleset, in the order asked. */
export function reachOfRuleset(rs: Ruleset, doors: readonly Door[], explain = false): Reach[] {
  const chains = { incoming: reachChains(rs, 'input'), forwarded: reachChains(rs, 'forward') };
  return doors.map((d) => reachThrough(chains[d.path], d, explain));
}

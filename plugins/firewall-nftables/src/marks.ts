/**
 * A packet's mark, or its connection's, read as the sources that carry it (issue 32). A found
 * firewall that classifies by source first — `meta mark set ip saddr map @country`, `ct state new
 * ct mark set ip saddr map @asn` — and tests the mark below in the same chain (`meta mark != { $DE }
 * tcp dport 22 drop`, `ct mark @asn_blocklist reject`) tests its sources: the keys of the map whose
 * value the test names, and, where the test names 0, every source the map does not hold (a lookup
 * that misses sets nothing, and a new packet's or connection's mark is 0).
 *
 * Read only where that holds for certain: the test comes after the setter in the same chain, and
 * every statement of the whole ruleset that sets that mark is such a setter in that chain, with no
 * match but `ct state new`. Anything else that sets it (a constant, another chain, a prerouting
 * hook, iptables-nft's MARK target) leaves the test unread, as before. What nft cannot show — a
 * legacy iptables mangle table, tc — is not seen here.
 */
import { cidrSpan, complement, intersect, spansToSet, union, wholeOf, NOWHERE, type AddressSet, type IpFamily, type Span } from '@meshp/core/net';
import type { Expr, NftRule, Ruleset } from './schema.js';
import { chainKey, tableKey } from './schema.js';

export type MarkKey = 'meta' | 'ct';

/** One family's map: each key's sources and the mark it sets. */
interface MarkMap {
  entries: { spans: Span[]; value: number }[];
}

/** The setters before a rule, by mark and family. */
export type MarkAliases = Partial<Record<MarkKey, Partial<Record<IpFamily, MarkMap>>>>;

const KEYS: readonly MarkKey[] = ['meta', 'ct'];

function markKeyOf(left: unknown): MarkKey | null {
  const o = left as { meta?: { key?: unknown }; ct?: { key?: unknown; dir?: unknown } } | null;
  if (o?.meta?.key === 'mark') return 'meta';
  if (o?.ct?.key === 'mark' && o.ct.dir === undefined) return 'ct';
  return null;
}

function address(x: unknown): Span[] | null {
  try {
    if (typeof x === 'string') return [cidrSpan(x)];
    const o = x as { prefix?: { addr: string; len: number }; range?: [string, string]; elem?: { val?: unknown } } | null;
    if (o?.elem) return address(o.elem.val);
    if (o?.prefix) return [cidrSpan(`${o.prefix.addr}/${o.prefix.len}`)];
    if (Array.isArray(o?.range)) {
      const [a, b] = o.range.map((v) => cidrSpan(String(v)));
      return a && b ? [{ family: a.family, first: a.first, last: b.last }] : null;
    }
  } catch {
    // not an address nft would print
  }
  return null;
}

/** A map of the table by name, read as sources to marks; null when an element cannot be read. */
function readMap(rs: Ruleset, table: string, name: string): MarkMap | null {
  for (const o of rs.objects) {
    const m = (o as { map?: { family: string; table: string; name: string; map?: unknown; elem?: unknown[] } }).map;
    if (!m || m.name !== name || tableKey(m as { family: string; table?: string; name: string }) !== table || m.map !== 'mark') continue;
    const entries: MarkMap['entries'] = [];
    for (const e of m.elem ?? []) {
      if (!Array.isArray(e) || e.length !== 2 || typeof e[1] !== 'number') return null;
      const spans = address(e[0]);
      if (!spans) return null;
      entries.push({ spans, value: e[1] });
    }
    return { entries };
  }
  return null;
}

/** A setter this reading can follow: which mark, for which family, from which map; null for any other. */
function setterOf(rule: NftRule, rs: Ruleset): { key: MarkKey; family: IpFamily; map: MarkMap } | null {
  let found: { key: MarkKey; family: IpFamily; map: MarkMap } | null = null;
  for (const e of rule.expr) {
    const kind = Object.keys(e)[0]!;
    if (kind === 'counter') continue;
    if (kind === 'match') {
      const m = e.match as { op?: string; left?: { ct?: { key?: unknown } }; right?: unknown };
      const right = typeof m.right === 'string' ? [m.right] : ((m.right as { set?: unknown[] } | null)?.set ?? []);
      if (m.left?.ct?.key === 'state' && (m.op === 'in' || m.op === '==') && right.includes('new')) continue;
      return null;
    }
    if (kind !== 'mangle' || found) return null;
    const { key, value } = e.mangle as { key?: unknown; value?: { map?: { key?: { payload?: { protocol?: string; field?: string } }; data?: unknown } } };
    const mark = markKeyOf(key);
    const p = value?.map?.key?.payload;
    const data = value?.map?.data;
    if (!mark || !p || p.field !== 'saddr' || (p.protocol !== 'ip' && p.protocol !== 'ip6') || typeof data !== 'string' || !data.startsWith('@')) return null;
    const map = readMap(rs, tableKey(rule), data.slice(1));
    if (!map) return null;
    found = { key: mark, family: p.protocol === 'ip' ? 4 : 6, map };
  }
  return found;
}

/** Whether a statement sets a mark (any way): a mangle of it, or an xtables MARK/CONNMARK target. */
function setsMark(e: Expr): MarkKey[] {
  const kind = Object.keys(e)[0];
  if (kind === 'mangle') {
    const k = markKeyOf((e.mangle as { key?: unknown }).key);
    return k ? [k] : [];
  }
  if (kind === 'xt') return /mark/i.test(String((e.xt as { name?: unknown } | null)?.name ?? '')) ? [...KEYS] : [];
  return [];
}

/**
 * For each rule of the ruleset (by chain key, in order), the setters before it that may be read:
 * a mark is followed only in the one chain all of its setters are in, each of them one this reading
 * can follow.
 */
export function markAliasesOf(rs: Ruleset): Map<string, MarkAliases[]> {
  const home = new Map<MarkKey, string | null>();
  for (const r of rs.rules) {
    const followable = setterOf(r, rs);
    for (const k of new Set(r.expr.flatMap(setsMark))) {
      const ok = followable?.key === k && (home.get(k) ?? chainKey(r)) === chainKey(r) && home.get(k) !== null;
      home.set(k, ok ? chainKey(r) : null);
    }
  }
  const out = new Map<string, MarkAliases[]>();
  const byChain = new Map<string, NftRule[]>();
  for (const r of rs.rules) byChain.set(chainKey(r), [...(byChain.get(chainKey(r)) ?? []), r]);
  for (const [chain, rules] of byChain) {
    if (![...home.values()].includes(chain)) continue;
    let now: MarkAliases = {};
    out.set(
      chain,
      rules.map((r) => {
        const before = now;
        const s = setterOf(r, rs);
        if (s && home.get(s.key) === chain) now = { ...now, [s.key]: { ...now[s.key], [s.family]: s.map } };
        return before;
      }),
    );
  }
  return out;
}

/** Whether a mark value is one the test's right side names: a number, a range, a set of them, a named set; null when unreadable. */
export function markValues(right: unknown, sets?: ReadonlyMap<string, unknown[]>): ((v: number) => boolean) | null {
  if (typeof right === 'number') return (v) => v === right;
  if (typeof right === 'string' && right.startsWith('@')) {
    const elems = sets?.get(right.slice(1));
    return elems ? markValues({ set: elems }) : null;
  }
  const o = right as { range?: unknown[]; set?: unknown[]; elem?: { val?: unknown } } | null;
  if (o?.elem) return markValues(o.elem.val);
  if (Array.isArray(o?.range) && o.range.length === 2 && o.range.every((x) => typeof x === 'number')) {
    const [lo, hi] = o.range as [number, number];
    return (v) => v >= lo && v <= hi;
  }
  if (Array.isArray(o?.set)) {
    const parts = o.set.map((x) => markValues(x));
    return parts.every((p) => p !== null) ? (v) => parts.some((p) => p!(v)) : null;
  }
  return null;
}

const toSpans = (a: AddressSet): Span[] => ([4, 6] as const).flatMap((family) => a[family].map(([first, last]) => ({ family, first, last })));

/** The sources whose mark the predicate holds for, both families, given the setters before the test. */
export function sourcesMarked(maps: Partial<Record<IpFamily, MarkMap>>, holds: (v: number) => boolean): Span[] {
  let set: AddressSet = NOWHERE;
  for (const family of [4, 6] as const) {
    const m = maps[family];
    const whole = wholeOf([family]);
    const keyed = m ? spansToSet(m.entries.flatMap((e) => e.spans)) : NOWHERE;
    if (m) set = union(set, intersect(whole, spansToSet(m.entries.filter((e) => holds(e.value)).flatMap((e) => e.spans))));
    if (holds(0)) set = union(set, intersect(whole, complement(keyed)));
  }
  return toSpans(set);
}

export { markKeyOf };

/**
 * Which sources arrive on which interface: the node's routes read backwards. A packet from a
 * source comes in on the interface the route back to it leaves by (what strict reverse-path
 * filtering enforces, and what a host with one route to each network sees), so an interface
 * match (`-i ens3`, `iifname "pppoe-wan"`) reads as a set of sources, and a per-interface
 * dispatch (`-A INPUT -i ens3 -j FILTERS`, OpenWrt fw4's zone jumps) places an opening in the
 * zone its range arrives in.
 */
import { cidrSpan, complement, intersect, spansToSet, subtract, union, wholeOf, NOWHERE, type AddressSet, type IpFamily } from './spans.js';

/** One route of the node's main table: its destination (`default` or a CIDR), the device it leaves by. */
export interface RouteEntry {
  family: IpFamily;
  dst: string;
  /** Absent: no device (a blackhole, an unreachable route). */
  dev?: string;
}

/** Interface name to the sources whose route back leaves by it. */
export type Arrivals = ReadonlyMap<string, AddressSet>;

function prefixOf(r: RouteEntry): { set: AddressSet; len: number } | null {
  if (r.dst === 'default') return { set: wholeOf([r.family]), len: 0 };
  try {
    const text = r.dst.includes('/') ? r.dst : `${r.dst}/${r.family === 4 ? 32 : 128}`;
    return { set: spansToSet([cidrSpan(text)]), len: Number(text.split('/')[1]) };
  } catch {
    return null;
  }
}

/** The longest prefix wins: each route claims what no longer one already has. */
export function arrivalsOf(routes: readonly RouteEntry[]): Arrivals {
  const read = routes.flatMap((r) => {
    const p = prefixOf(r);
    return p ? [{ ...p, dev: r.dev }] : [];
  });
  read.sort((a, b) => b.len - a.len);
  let claimed = NOWHERE;
  const out = new Map<string, AddressSet>();
  for (const r of read) {
    const mine = subtract(r.set, claimed);
    claimed = union(claimed, r.set);
    if (r.dev) out.set(r.dev, union(out.get(r.dev) ?? NOWHERE, mine));
  }
  return out;
}

/**
 * The sources arriving on an interface as a rule names it: iptables' `eth+` is every interface
 * whose name starts `eth`; negated, every source that does not. Null: no route leaves by it and
 * none starts so — the name cannot be read (an interface that is not up yet, a typo).
 */
export function arrivingOn(arrivals: Arrivals, name: string, negate: boolean): AddressSet | null {
  const wildcard = name.endsWith('+');
  const stem = wildcard ? name.slice(0, -1) : name;
  const names = [...arrivals.keys()].filter((n) => (wildcard ? n.startsWith(stem) : n === stem));
  if (names.length === 0) return null;
  const set = names.reduce((acc, n) => union(acc, arrivals.get(n)!), NOWHERE);
  return negate ? complement(set) : set;
}

/** The interfaces a set of sources arrives on (for the operator), and whether some of it has no route. */
export function interfacesOf(arrivals: Arrivals, set: AddressSet): { names: string[]; unrouted: boolean } {
  let left = set;
  const names: string[] = [];
  for (const [n, s] of arrivals) {
    const hit = intersect(left, s);
    if (hit[4].length || hit[6].length) names.push(n);
    left = subtract(left, s);
  }
  return { names: names.sort(), unrouted: left[4].length > 0 || left[6].length > 0 };
}

/** `ip -j route show` output of one family as route entries; null when it is not that. */
export function routesFromIpJson(text: string, family: IpFamily): RouteEntry[] | null {
  try {
    const list = JSON.parse(text) as unknown;
    if (!Array.isArray(list)) return null;
    return list.flatMap((x: { dst?: unknown; dev?: unknown }) =>
      typeof x.dst === 'string' ? [{ family, dst: x.dst, ...(typeof x.dev === 'string' ? { dev: x.dev } : {}) }] : [],
    );
  } catch {
    return null;
  }
}

/**
 * Sets of source addresses, IPv4 and IPv6 apart, as sorted disjoint intervals: what a firewall's
 * rules leave reachable is computed by intersecting and subtracting these.
 */
import { addressText, parseRange, type IpFamily } from './address.js';

export type { IpFamily } from './address.js';

/** An inclusive interval of addresses of one family. */
export interface Span {
  family: IpFamily;
  first: bigint;
  last: bigint;
}

type Intervals = readonly (readonly [bigint, bigint])[];

export interface AddressSet {
  4: Intervals;
  6: Intervals;
}

const TOP: Record<IpFamily, bigint> = { 4: (1n << 32n) - 1n, 6: (1n << 128n) - 1n };

export const NOWHERE: AddressSet = Object.freeze({ 4: [], 6: [] });
export const EVERYWHERE: AddressSet = Object.freeze({ 4: [[0n, TOP[4]] as const], 6: [[0n, TOP[6]] as const] });

/** Only the given families, each whole. */
export function wholeOf(families: readonly IpFamily[]): AddressSet {
  return { 4: families.includes(4) ? EVERYWHERE[4] : [], 6: families.includes(6) ? EVERYWHERE[6] : [] };
}

function normalize(list: Intervals): Intervals {
  const sorted = [...list].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  const out: [bigint, bigint][] = [];
  for (const [lo, hi] of sorted) {
    const last = out.at(-1);
    if (last && lo <= last[1] + 1n) {
      if (hi > last[1]) last[1] = hi;
    } else {
      out.push([lo, hi]);
    }
  }
  return out;
}

export function spansToSet(spans: readonly Span[]): AddressSet {
  return {
    4: normalize(spans.filter((s) => s.family === 4).map((s) => [s.first, s.last] as const)),
    6: normalize(spans.filter((s) => s.family === 6).map((s) => [s.first, s.last] as const)),
  };
}

export function cidrSpan(cidr: string): Span {
  const r = parseRange(cidr);
  return { family: r.family, first: r.first, last: r.last };
}

export function union(a: AddressSet, b: AddressSet): AddressSet {
  return { 4: normalize([...a[4], ...b[4]]), 6: normalize([...a[6], ...b[6]]) };
}

function intersectOne(a: Intervals, b: Intervals): Intervals {
  const out: [bigint, bigint][] = [];
  let i = 0;
  let j = 0;
  while (i < a.length && j < b.length) {
    const lo = a[i]![0] > b[j]![0] ? a[i]![0] : b[j]![0];
    const hi = a[i]![1] < b[j]![1] ? a[i]![1] : b[j]![1];
    if (lo <= hi) out.push([lo, hi]);
    if (a[i]![1] < b[j]![1]) i++;
    else j++;
  }
  return out;
}

export function intersect(a: AddressSet, b: AddressSet): AddressSet {
  return { 4: intersectOne(a[4], b[4]), 6: intersectOne(a[6], b[6]) };
}

function complementOne(a: Intervals, top: bigint): Intervals {
  const out: [bigint, bigint][] = [];
  let next = 0n;
  for (const [lo, hi] of a) {
    if (lo > next) out.push([next, lo - 1n]);
    next = hi + 1n;
  }
  if (next <= top) out.push([next, top]);
  return out;
}

export function complement(a: AddressSet): AddressSet {
  return { 4: complementOne(a[4], TOP[4]), 6: complementOne(a[6], TOP[6]) };
}

export function subtract(a: AddressSet, b: AddressSet): AddressSet {
  return intersect(a, complement(b));
}

export function isEmpty(a: AddressSet): boolean {
  return a[4].length === 0 && a[6].length === 0;
}

export function isEverywhere(a: AddressSet): boolean {
  return [4, 6].every((f) => a[f as IpFamily].length === 1 && a[f as IpFamily][0]![0] === 0n && a[f as IpFamily][0]![1] === TOP[f as IpFamily]);
}

/** The fewest CIDRs covering exactly the set, IPv4 first, each in address order. */
export function toCidrs(a: AddressSet): string[] {
  const out: string[] = [];
  for (const family of [4, 6] as const) {
    const bits = family === 4 ? 32n : 128n;
    for (const [lo, hi] of a[family]) {
      let at = lo;
      while (at <= hi) {
        let len = bits;
        // Grow the block while it stays aligned and inside the interval.
        while (len > 0n) {
          const size = 1n << (bits - len + 1n);
          if (at % size !== 0n || at + size - 1n > hi) break;
          len--;
        }
        out.push(`${addressText(at, family)}/${len}`);
        at += 1n << (bits - len);
      }
    }
  }
  return out;
}

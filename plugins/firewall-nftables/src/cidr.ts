/**
 * Address ranges as nft lists them back: nft merges adjacent prefixes of a set into ranges,
 * so both what we want and what we find are reduced to the same canonical list of CIDRs.
 */
import { addressFamily, addressText, addressToBigInt, parseRange, spansToSet, toCidrs } from '@meshp/core/net';

export type IpFamily = 'ip' | 'ip6';

export interface Range {
  family: IpFamily;
  lo: bigint;
  hi: bigint;
}

const NUM = { ip: 4, ip6: 6 } as const;

export function familyOf(addr: string): IpFamily | null {
  const f = addressFamily(addr);
  return f === 4 ? 'ip' : f === 6 ? 'ip6' : null;
}

export function toBigInt(addr: string): bigint {
  return addressToBigInt(addr);
}

export function fromBigInt(n: bigint, family: IpFamily): string {
  return addressText(n, NUM[family]);
}

/** "10.0.0.0/8", "fd00::/8" or a bare address. Host bits are masked off. */
export function parseCidr(text: string): Range {
  const r = parseRange(text);
  return { family: r.family === 4 ? 'ip' : 'ip6', lo: r.first, hi: r.last };
}

/** Sorted, merged, then cut into the fewest CIDRs (IPv4 first). */
export function canonical(ranges: Range[]): string[] {
  return toCidrs(spansToSet(ranges.map((r) => ({ family: NUM[r.family], first: r.lo, last: r.hi }))));
}

const memo = new Map<string, string[]>();

/** Remembers the canonical form of an address list: thousands of openings share a handful of lists. */
export function memoCanonical(key: string, compute: () => string[]): string[] {
  let v = memo.get(key);
  if (!v) {
    if (memo.size > 10_000) memo.clear();
    v = compute();
    memo.set(key, v);
  }
  return v;
}

/** Canonical CIDRs of a `from` list, by family. */
export function splitFamilies(cidrs: readonly string[]): Record<IpFamily, string[]> {
  const key = cidrs.length === 1 ? cidrs[0]! : cidrs.join(',');
  let v = splits.get(key);
  if (!v) {
    const all = canonical(cidrs.map(parseCidr));
    if (splits.size > 10_000) splits.clear();
    v = { ip: all.filter((c) => !c.includes(':')), ip6: all.filter((c) => c.includes(':')) };
    splits.set(key, v);
  }
  // Callers get their own arrays: a memo must not be changed through them.
  return { ip: [...v.ip], ip6: [...v.ip6] };
}

const splits = new Map<string, Record<IpFamily, string[]>>();

export function isWhole(cidrs: readonly string[]): boolean {
  return cidrs.length === 1 && (cidrs[0] === '0.0.0.0/0' || cidrs[0] === '::/0');
}

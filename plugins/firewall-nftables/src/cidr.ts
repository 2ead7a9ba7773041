/**
 * Address ranges as nft lists them back: nft merges adjacent prefixes of a set into ranges,
 * so both what we want and what we find are reduced to the same canonical list of CIDRs.
 */
import { isIPv4, isIPv6 } from 'node:net';
import { MeshpError } from '@meshp/core';

export type IpFamily = 'ip' | 'ip6';

export interface Range {
  family: IpFamily;
  lo: bigint;
  hi: bigint;
}

const BITS: Record<IpFamily, number> = { ip: 32, ip6: 128 };

export function familyOf(addr: string): IpFamily | null {
  if (isIPv4(addr)) return 'ip';
  if (isIPv6(addr)) return 'ip6';
  return null;
}

export function toBigInt(addr: string): bigint {
  if (isIPv4(addr)) return addr.split('.').reduce((n, p) => (n << 8n) | BigInt(Number(p)), 0n);
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(addr);
  const groups = expand(v4 ? `${addr.slice(0, -v4[1]!.length)}0:0` : addr);
  if (v4) {
    const n = toBigInt(v4[1]!);
    groups[6] = n >> 16n;
    groups[7] = n & 0xffffn;
  }
  return groups.reduce((acc, g) => (acc << 16n) | g, 0n);
}

function expand(text: string): bigint[] {
  const [head, rest] = text.split('::') as [string, string | undefined];
  const a = head ? head.split(':') : [];
  const b = rest !== undefined && rest !== '' ? rest.split(':') : [];
  const fill = rest === undefined ? [] : new Array<string>(8 - a.length - b.length).fill('0');
  return [...a, ...fill, ...b].map((g) => BigInt(parseInt(g, 16)));
}

export function fromBigInt(n: bigint, family: IpFamily): string {
  if (family === 'ip') return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join('.');
  const groups = Array.from({ length: 8 }, (_, i) => (n >> BigInt(112 - 16 * i)) & 0xffffn);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0n) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0n) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** "10.0.0.0/8", "fd00::/8" or a bare address. Host bits are masked off. */
export function parseCidr(text: string): Range {
  const [addr, lenText] = text.trim().split('/') as [string, string | undefined];
  const family = familyOf(addr);
  if (!family) throw new MeshpError('MESHP_DECLARATION_INVALID', `not an address range: ${text}`);
  const bits = BITS[family];
  const len = lenText === undefined ? bits : Number(lenText);
  if (!Number.isInteger(len) || len < 0 || len > bits) throw new MeshpError('MESHP_DECLARATION_INVALID', `bad prefix length in ${text}`);
  const host = (1n << BigInt(bits - len)) - 1n;
  const lo = toBigInt(addr) & ~host;
  return { family, lo, hi: lo | host };
}

/** Sorted, merged, then cut into the fewest CIDRs. */
export function canonical(ranges: Range[]): string[] {
  const out: string[] = [];
  for (const family of ['ip', 'ip6'] as const) {
    const sorted = ranges.filter((r) => r.family === family).sort((a, b) => (a.lo < b.lo ? -1 : a.lo > b.lo ? 1 : 0));
    const merged: Range[] = [];
    for (const r of sorted) {
      const last = merged[merged.length - 1];
      if (last && r.lo <= last.hi + 1n) last.hi = r.hi > last.hi ? r.hi : last.hi;
      else merged.push({ ...r });
    }
    for (const r of merged) out.push(...split(r));
  }
  return out;
}

function split(r: Range): string[] {
  const bits = BITS[r.family];
  const out: string[] = [];
  let lo = r.lo;
  while (lo <= r.hi) {
    let size = 0;
    while (size < bits) {
      const next = 1n << BigInt(size + 1);
      if (lo % next !== 0n || lo + next - 1n > r.hi) break;
      size++;
    }
    out.push(`${fromBigInt(lo, r.family)}/${bits - size}`);
    lo += 1n << BigInt(size);
  }
  return out;
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

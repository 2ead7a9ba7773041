/** CIDR ranges in the canonical form iptables-save prints (network address, prefix length). */
import { isIP } from 'node:net';
import { MeshpError } from '@meshp/core';

export type Family = 4 | 6;

export interface Cidr {
  family: Family;
  /** Canonical text, e.g. "10.1.0.0/24", "fd00:1::/64", "10.1.0.5/32". */
  text: string;
}

function v4ToBig(addr: string): bigint {
  return addr.split('.').reduce((acc, p) => (acc << 8n) | BigInt(Number(p)), 0n);
}

function v6ToBig(addr: string): bigint {
  let a = addr;
  if (a.includes('.')) {
    const i = a.lastIndexOf(':');
    const v4 = v4ToBig(a.slice(i + 1));
    a = `${a.slice(0, i)}:${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head, tail] = a.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail === undefined ? [] : tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function bigToV4(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join('.');
}

/** RFC 5952: lowercase, leading zeros dropped, the longest run (≥2) of zero groups as "::". */
function bigToV6(n: bigint): string {
  const g = Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

export function parseCidr(text: string): Cidr {
  const [addr, lenText] = text.trim().split('/') as [string, string | undefined];
  const fam = isIP(addr);
  if (fam !== 4 && fam !== 6) throw new MeshpError('MESHP_FIREWALL_FAILED', `not an address range: ${text}`);
  const bits = fam === 4 ? 32 : 128;
  const len = lenText === undefined ? bits : Number(lenText);
  if (!Number.isInteger(len) || len < 0 || len > bits || (lenText !== undefined && !/^\d+$/.test(lenText))) {
    throw new MeshpError('MESHP_FIREWALL_FAILED', `not an address range: ${text}`);
  }
  const n = fam === 4 ? v4ToBig(addr) : v6ToBig(addr);
  const mask = len === 0 ? 0n : ((1n << BigInt(len)) - 1n) << BigInt(bits - len);
  const net = n & mask;
  return { family: fam, text: `${fam === 4 ? bigToV4(net) : bigToV6(net)}/${len}` };
}

/** The ranges of one family, canonical and sorted. */
export function rangesOf(family: Family, from: readonly string[]): string[] {
  // Thousands of openings share a handful of `from` lists: each is parsed once.
  const key = `${family} ${from.join(' ')}`;
  let v = memo.get(key);
  if (!v) {
    v = [...new Set(from.map(parseCidr).filter((c) => c.family === family).map((c) => c.text))].sort();
    if (memo.size > 10_000) memo.clear();
    memo.set(key, v);
  }
  return [...v];
}

const memo = new Map<string, string[]>();

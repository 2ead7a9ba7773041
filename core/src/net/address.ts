/**
 * IP addresses and CIDR ranges as numbers, one implementation for core and every firewall plugin:
 * parsing (IPv4, IPv6, IPv4-mapped IPv6), the canonical text firewalls print back (RFC 5952 for
 * IPv6), and ranges with their host bits masked off.
 */
import { isIP } from 'node:net';
import { MeshpError, type ErrorCode } from '../errors.js';

export type IpFamily = 4 | 6;

export const FAMILY_BITS: Record<IpFamily, number> = { 4: 32, 6: 128 };

export function addressFamily(text: string): IpFamily | null {
  const f = isIP(text);
  return f === 4 || f === 6 ? f : null;
}

function v4(addr: string): bigint {
  return addr.split('.').reduce((n, p) => (n << 8n) | BigInt(Number(p)), 0n);
}

/** The address as a number; the caller has checked it with `addressFamily`. */
export function addressToBigInt(addr: string): bigint {
  if (isIP(addr) === 4) return v4(addr);
  let a = addr;
  const mapped = /(\d+\.\d+\.\d+\.\d+)$/.exec(a);
  if (mapped) {
    const n = v4(mapped[1]!);
    a = `${a.slice(0, -mapped[1]!.length)}${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head, tail] = a.split('::') as [string, string | undefined];
  const h = head ? head.split(':') : [];
  const t = tail ? tail.split(':') : [];
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** Dotted quad, or RFC 5952: lowercase, no leading zeros, the longest run (two or more) of zero groups as "::". */
export function addressText(n: bigint, family: IpFamily): string {
  if (family === 4) return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join('.');
  const g = Array.from({ length: 8 }, (_, i) => Number((n >> BigInt(112 - 16 * i)) & 0xffffn));
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8;) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

export interface Range {
  family: IpFamily;
  first: bigint;
  last: bigint;
  len: number;
  /** Canonical: the network address and the prefix length, e.g. "10.1.0.0/24". */
  text: string;
}

/** "10.0.0.0/8", "fd00::/8" or a bare address (a /32 or /128). Host bits are masked off. */
export function parseRange(text: string, code: ErrorCode = 'MESHP_DECLARATION_INVALID'): Range {
  const [addr, lenText] = text.trim().split('/') as [string, string | undefined];
  const family = addressFamily(addr);
  if (!family) throw new MeshpError(code, `not an address range: ${text}`);
  const bits = FAMILY_BITS[family];
  const len = lenText === undefined ? bits : /^\d+$/.test(lenText) ? Number(lenText) : NaN;
  if (!Number.isInteger(len) || len < 0 || len > bits) throw new MeshpError(code, `not an address range: ${text}`);
  const host = (1n << BigInt(bits - len)) - 1n;
  const first = addressToBigInt(addr) & ~host & ((1n << BigInt(bits)) - 1n);
  return { family, first, last: first | host, len, text: `${addressText(first, family)}/${len}` };
}

/** CIDR ranges as numbers, for overlap checks. IPv4 and IPv6. */
import { MeshpError } from '../errors.js';

export interface Range {
  family: 4 | 6;
  first: bigint;
  last: bigint;
  text: string;
}

function v4(addr: string): bigint | null {
  const parts = addr.split('.');
  if (parts.length !== 4 || parts.some((p) => !/^\d{1,3}$/.test(p) || Number(p) > 255)) return null;
  return parts.reduce((n, p) => (n << 8n) | BigInt(Number(p)), 0n);
}

function v6(addr: string): bigint | null {
  const [head, tail, extra] = addr.split('::');
  if (extra !== undefined) return null;
  const groups = (s: string | undefined) => (s ? s.split(':') : []);
  const h = groups(head);
  const t = groups(tail);
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  const all = [...h, ...Array<string>(Math.max(fill, 0)).fill('0'), ...t];
  if (all.length !== 8 || all.some((g) => !/^[0-9a-fA-F]{1,4}$/.test(g))) return null;
  return all.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

export function parseRange(cidr: string): Range {
  const [addr, lenText] = cidr.split('/');
  const family: 4 | 6 = addr!.includes(':') ? 6 : 4;
  const bits = family === 4 ? 32 : 128;
  const len = lenText === undefined ? bits : Number(lenText);
  const value = family === 4 ? v4(addr!) : v6(addr!);
  if (value === null || !Number.isInteger(len) || len < 0 || len > bits) {
    throw new MeshpError('MESHP_DECLARATION_INVALID', `not an address range: ${cidr}`);
  }
  const host = (1n << BigInt(bits - len)) - 1n;
  const first = value & ~host & ((1n << BigInt(bits)) - 1n);
  return { family, first, last: first | host, text: cidr };
}

export function overlaps(a: string, b: string): boolean {
  const x = parseRange(a);
  const y = parseRange(b);
  return x.family === y.family && x.first <= y.last && y.first <= x.last;
}

export function contains(range: string, addr: string): boolean {
  const r = parseRange(range);
  const a = parseRange(addr);
  return r.family === a.family && r.first <= a.first && a.last <= r.last;
}

/** Overlap and containment of CIDR ranges (IPv4 and IPv6), for genesis's checks. */
import { parseRange } from './address.js';

export { parseRange, type Range } from './address.js';

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

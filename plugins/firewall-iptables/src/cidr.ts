/** CIDR ranges in the canonical form iptables-save prints (network address, prefix length). */
import { parseRange } from '@meshp/core/net';

export type Family = 4 | 6;

export interface Cidr {
  family: Family;
  /** Canonical text, e.g. "10.1.0.0/24", "fd00:1::/64", "10.1.0.5/32". */
  text: string;
}

/** Canonical text; a range that is not one is MESHP_FIREWALL_FAILED (it came from a ruleset or the declaration). */
export function parseCidr(text: string): Cidr {
  const r = parseRange(text, 'MESHP_FIREWALL_FAILED');
  return { family: r.family, text: r.text };
}

/** The ranges of one family, canonical and sorted. */
export function rangesOf(family: Family, from: readonly string[]): string[] {
  // Thousands of openings share a handful of `from` lists: each is parsed once.
  const key = `${family} ${from.join(' ')}`;
  let v = memo.get(key);
  if (!v) {
    v = [
      ...new Set(
        from
          .map(parseCidr)
          .filter((c) => c.family === family)
          .map((c) => c.text),
      ),
    ].sort();
    if (memo.size > 10_000) memo.clear();
    memo.set(key, v);
  }
  return [...v];
}

const memo = new Map<string, string[]>();

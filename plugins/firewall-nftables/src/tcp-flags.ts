/**
 * nft's `tcp flags` matches read against a new connection's first packet (core's synMeets): fw4's
 * syn_flood jump and the NULL/XMAS scan drops. Split from reach-rule.ts, which calls it first for
 * every match.
 */
import { synMeets, tcpFlagSet, type ReachRule } from '@meshp/core/net';

/** One `match` statement as `nft -j` lists it. */
export type Match = { op?: unknown; left?: Record<string, Record<string, unknown>>; right?: unknown };

/** Whether a match is on `tcp flags` (bare, or `& (MASK)`): the mask, or null when it is not one. */
function flagsMask(left: unknown): Set<string> | null | undefined {
  const isFlags = (x: unknown) => {
    const p = (x as { payload?: Record<string, unknown> } | null)?.payload;
    return p?.protocol === 'tcp' && p.field === 'flags';
  };
  if (isFlags(left)) return tcpFlagSet(['all']);
  const and = (left as { '&'?: unknown } | null)?.['&'];
  if (!Array.isArray(and) || and.length !== 2 || !isFlags(and[0])) return undefined;
  const mask = typeof and[1] === 'string' ? [and[1]] : and[1];
  return Array.isArray(mask) && mask.every((x) => typeof x === 'string') ? tcpFlagSet(mask as string[]) : null;
}

/**
 * `tcp flags & (fin | syn | rst | ack) == syn` (fw4's syn_flood jump) and the scan drops
 * (`… == 0x0`, `== fin | psh | urg`), read against a SYN (core's synMeets); `tcp flags syn`
 * (op `in`: any of them set) and `!` (none set) too. A check no SYN meets sees only connections under way.
 */
export function readFlags(m: Match, r: ReachRule): boolean | undefined {
  const mask = flagsMask(m.left);
  if (mask === undefined) return undefined;
  const comp = m.right === 0 ? new Set<string>() : tcpFlagSet(typeof m.right === 'string' ? [m.right] : Array.isArray(m.right) ? (m.right as string[]) : ['?']);
  if (!mask || !comp) return false;
  let meets: boolean | null;
  const ecn = comp.has('ece') || comp.has('cwr') ? null : false;
  // `in`: any of them set; `!` (the NULL scan's `== 0x0` as nft lists it): none of them set.
  if (m.op === 'in') meets = comp.has('syn') || ecn;
  else if (m.op === '!') meets = comp.has('syn') ? false : ecn === null ? null : true;
  else if (m.op === '==' || m.op === '!=') meets = synMeets(mask, comp, m.op === '!=');
  else return false;
  if (meets === null) return false;
  r.protocols = ['tcp'];
  if (!meets) r.notNew = true;
  return true;
}

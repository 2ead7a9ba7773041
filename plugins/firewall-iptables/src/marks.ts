/**
 * The mesh's rules in the found chains: each an argument list carrying `-m comment --comment meshp:<id>`.
 * Built from openings, and read back from iptables-save into the same shape, so the two compare.
 */
import type { Opening, Protocol, TrafficPath } from '@meshp/core';
import type { Family } from './cidr.js';
import { optionValue, type SavedRule } from './save-format.js';

export const MARK = 'meshp:';
/** The jumps into the derived chains carry this mark; they are not openings. */
export const DERIVED_MARK = 'meshp:derived';

export interface MarkedSpec {
  id: string;
  chain: string;
  /** Canonical CIDR, or null for anywhere. */
  source: string | null;
  /** `! -s source`: from anywhere outside source. */
  negated: boolean;
  protocol: Protocol;
  port: number;
  path: TrafficPath;
  action: Opening['action'];
  /** `-m conntrack ! --ctstate INVALID`: an accept in a found chain that keeps invalid packets out (core's deniesInvalid). */
  valid?: boolean;
}

export function specKey(s: MarkedSpec): string {
  return [s.id, s.chain, s.negated ? '!' : '', s.source ?? '*', s.protocol, s.port, s.path, s.action, s.valid ? 'valid' : ''].join('|');
}

export function markOf(args: readonly string[]): string | null {
  for (let i = 0; i < args.length - 1; i++) {
    if (args[i] === '--comment' && args[i + 1]!.startsWith(MARK)) return args[i + 1]!;
  }
  return null;
}

export function isMarked(rule: SavedRule): boolean {
  return markOf(rule.args) !== null;
}

export function targetOf(args: readonly string[]): string | undefined {
  return optionValue(args, '-j') ?? optionValue(args, '-g');
}

export function isDrop(args: readonly string[]): boolean {
  const t = targetOf(args);
  return t === 'DROP' || t === 'REJECT';
}

export function buildArgs(s: MarkedSpec): string[] {
  const src = s.source ? [...(s.negated ? ['!'] : []), '-s', s.source] : [];
  const match =
    s.path === 'incoming'
      ? ['-p', s.protocol, '-m', s.protocol, '--dport', String(s.port)]
      : // Only the original direction: a reply carries the same original port, from the container's address.
        ['-p', s.protocol, '-m', 'conntrack', '--ctorigdstport', String(s.port), '--ctdir', 'ORIGINAL'];
  const state = s.valid ? ['-m', 'conntrack', '!', '--ctstate', 'INVALID'] : [];
  return [...src, ...match, ...state, '-m', 'comment', '--comment', `${MARK}${s.id}`, '-j', s.action === 'accept' ? 'ACCEPT' : 'DROP'];
}

/** Reads one of our rules back; null for a rule that is not an opening (the derived jumps, a rule edited by hand). */
export function parseMarked(rule: SavedRule): MarkedSpec | null {
  const mark = markOf(rule.args);
  if (!mark || mark === DERIVED_MARK) return null;
  const a = rule.args;
  const target = targetOf(a);
  const action = target === 'ACCEPT' ? 'accept' : target === 'DROP' ? 'drop' : null;
  const protocol = optionValue(a, '-p');
  const dport = optionValue(a, '--dport');
  const orig = optionValue(a, '--ctorigdstport');
  const portText = dport ?? orig;
  if (!action || (protocol !== 'tcp' && protocol !== 'udp') || !portText || !/^\d+$/.test(portText)) return null;
  const si = a.indexOf('-s');
  const ci = a.indexOf('--ctstate');
  const valid = ci > 0 && a[ci - 1] === '!' && a[ci + 1] === 'INVALID';
  return {
    id: mark.slice(MARK.length),
    chain: rule.chain,
    source: si >= 0 ? a[si + 1]! : null,
    negated: si > 0 && a[si - 1] === '!',
    protocol,
    port: Number(portText),
    path: dport !== undefined ? 'incoming' : 'forwarded',
    action,
    ...(valid ? { valid } : {}),
  };
}

/** Module of an opening read back: ids are `<module>/<path>/<protocol>/<port>` unless given. */
export function moduleOfId(id: string): string {
  const i = id.indexOf('/');
  return i > 0 ? id.slice(0, i) : '';
}

/** Groups marked rules (of every family) back into openings and refusals. */
export function toOpenings(specs: readonly MarkedSpec[]): Opening[] {
  const byId = new Map<string, { first: MarkedSpec; sources: Set<string>; anywhere: boolean }>();
  for (const s of specs) {
    let g = byId.get(s.id);
    if (!g) byId.set(s.id, (g = { first: s, sources: new Set(), anywhere: false }));
    if (s.source === null || s.negated) g.anywhere = true;
    else g.sources.add(s.source);
  }
  return [...byId.values()]
    .map(({ first, sources, anywhere }) => ({
      id: first.id,
      module: moduleOfId(first.id),
      port: first.port,
      protocol: first.protocol,
      from: anywhere ? [] : [...sources].sort(),
      path: first.path,
      action: first.action,
    }))
    .sort((a, b) => a.id.localeCompare(b.id));
}

export type { Family };

/**
 * A router's forwarded paths in iptables (issue 26, ADR 0038): from the tunnel interface to a route
 * group's prefixes, what the policy allows and the replies, as marked rules in FORWARD placed by the
 * one placement rule of the input path (core's placeOpening, ADR 0008), and the masquerade as marked
 * rules at the head of nat POSTROUTING. Each rule's comment is `meshp:route/<group>/<hash>`, the hash
 * of what it says: present and wanted compare by comment. Only rules so marked are ever deleted.
 * On a converged node the accepts are the derived chain's (derived.ts); the masquerade is the same.
 */
import { createHash } from 'node:crypto';
import type { RouteForward, RoutePorts } from '@meshp/core';
import type { Placement } from '@meshp/core/net';
import { rangesOf, type Family } from './cidr.js';
import { MARK, markOf } from './marks.js';
import { placementOf } from './placement.js';
import { chainRules, formatArgs, type SavedTable } from './save-format.js';

export const ROUTE_MARK = `${MARK}route/`;

export const isRouteArgs = (args: readonly string[]): boolean => markOf(args)?.startsWith(ROUTE_MARK) ?? false;

function portArgs(p: RoutePorts): string[] {
  return p.protocol === 'any' ? [] : ['-p', p.protocol, '-m', p.protocol, '--dport', (p.range ?? '1-65535').replace('-', ':')];
}

function marked(group: string, where: string, args: string[], target: string): string[] {
  const h = createHash('sha256')
    .update(`${where}\n${args.join(' ')} ${target}`)
    .digest('hex')
    .slice(0, 12);
  return [...args, '-m', 'comment', '--comment', `${ROUTE_MARK}${group}/${h}`, '-j', target];
}

/** The accepts of the forwards in one family for `chain`: replies both ways, then each allowed source, prefix and port. */
export function acceptArgs(family: Family, forwards: readonly RouteForward[], chain: string, valid: boolean): string[][] {
  const out: string[][] = [];
  const state = ['-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED'];
  for (const f of forwards) {
    const to = rangesOf(family, f.to);
    for (const d of to) {
      out.push(marked(f.group, chain, ['-d', d, '-i', f.iif, ...state], 'ACCEPT'));
      out.push(marked(f.group, chain, ['-s', d, '-o', f.iif, ...state], 'ACCEPT'));
      for (const a of f.allow)
        for (const s of rangesOf(family, a.from))
          for (const p of a.ports)
            out.push(
              marked(
                f.group,
                chain,
                ['-s', s, '-d', d, '-i', f.iif, ...portArgs(p), ...(valid ? ['-m', 'conntrack', '!', '--ctstate', 'INVALID'] : [])],
                'ACCEPT',
              ),
            );
    }
  }
  return out;
}

/** The derived chain's drop of the rest from the tunnel to the prefixes (a converged node's FORWARD policy accepts). */
export function routeDrops(family: Family, forwards: readonly RouteForward[], chain: string): string[][] {
  return forwards.flatMap((f) => rangesOf(family, f.to).map((d) => marked(f.group, chain, ['-d', d, '-i', f.iif], 'DROP')));
}

/** The masquerade rules of the forwards in one family: the allowed mesh sources toward the prefixes, leaving by another interface. */
export function masqueradeArgs(family: Family, forwards: readonly RouteForward[]): string[][] {
  const out: string[][] = [];
  for (const f of forwards) {
    if (!f.masquerade) continue;
    const from = [...new Set(f.allow.flatMap((a) => rangesOf(family, a.from)))].sort();
    for (const d of rangesOf(family, f.to))
      for (const s of from) out.push(marked(f.group, 'nat POSTROUTING', ['-s', s, '-d', d, '!', '-o', f.iif], 'MASQUERADE'));
  }
  return out;
}

const groupOf = (args: readonly string[]) => markOf(args)!.slice(MARK.length).split('/').slice(0, 2).join('/');
const commentOf = (args: readonly string[]) => markOf(args)!;

export interface RouteEdit {
  filter: string[];
  nat: string[];
  added: string[];
  removed: string[];
  refused: { id: string; reason: string }[];
}

function place(p: Placement, nBefore: number): boolean {
  if (p.kind === 'before') return nBefore > p.after && nBefore <= p.index;
  if (p.kind === 'end') return nBefore > p.after;
  return false;
}

/**
 * The restore lines of one family: `found` (adopted), the accepts in FORWARD by the placement rule;
 * always, the masquerade at the head of nat POSTROUTING. A chain whose route rules differ from the
 * wanted ones has all of them taken out and put back in one transaction.
 */
export function planRoutes(
  family: Family,
  filter: SavedTable | undefined,
  nat: SavedTable | undefined,
  forwards: readonly RouteForward[],
  found: boolean,
): RouteEdit {
  const added = new Set<string>();
  const removed = new Set<string>();
  const refused: { id: string; reason: string }[] = [];
  const out: RouteEdit = { filter: [], nat: [], added: [], removed: [], refused };
  const wanted = found ? wantedAccepts(family, filter, forwards, refused) : [];
  forwardLines(filter, wanted, out, added, removed);
  natLines(family, nat, forwards, out, added, removed);
  const refusedIds = new Set(refused.map((r) => r.id));
  out.added = [...added].filter((x) => !refusedIds.has(x)).sort();
  out.removed = [...removed].filter((x) => !added.has(x)).sort();
  return out;
}

type Wanted = { args: string[]; p: Placement };

/** FORWARD's accepts, placed as an opening of the forwarded path would be, in the chain without our route rules. */
function wantedAccepts(family: Family, filter: SavedTable | undefined, forwards: readonly RouteForward[], refused: RouteEdit['refused']): Wanted[] {
  const stripped = filter ? { ...filter, rules: filter.rules.filter((r) => !isRouteArgs(r.args)) } : undefined;
  const wanted: Wanted[] = [];
  for (const f of forwards) {
    const src = f.allow.flatMap((a) => rangesOf(family, a.from))[0];
    const port = f.allow.flatMap((a) => a.ports)[0];
    if (!src || !rangesOf(family, f.to).length) continue;
    const p = placementOf(family, stripped, {
      id: `route/${f.group}`,
      chain: 'FORWARD',
      source: src,
      negated: false,
      protocol: port && port.protocol !== 'any' ? port.protocol : 'tcp',
      port: Number((port?.range ?? '1').split('-')[0]),
      path: 'forwarded',
      action: 'accept',
    });
    if (p.kind === 'none') continue;
    if (p.kind === 'refused') {
      refused.push({ id: `route/${f.group}`, reason: `${p.rule}: ${p.why}` });
      continue;
    }
    for (const args of acceptArgs(family, [f], 'FORWARD', p.invalid === true)) wanted.push({ args, p });
  }
  return wanted;
}

/** FORWARD as wanted: unchanged when every route rule stands where it should, else all taken out and put back. */
function forwardLines(filter: SavedTable | undefined, wanted: Wanted[], out: RouteEdit, added: Set<string>, removed: Set<string>): void {
  let n = 0;
  const have: { args: string[]; ok: boolean }[] = [];
  for (const r of chainRules(filter, 'FORWARD')) {
    if (!isRouteArgs(r.args)) {
      n++;
      continue;
    }
    const w = wanted.find((x) => commentOf(x.args) === commentOf(r.args));
    have.push({ args: r.args, ok: !!w && place(w.p, n) });
  }
  const same = have.length === wanted.length && have.every((h) => h.ok) && new Set(have.map((h) => commentOf(h.args))).size === have.length;
  if (same) return;
  for (const h of have) {
    out.filter.push(`-D FORWARD ${formatArgs(h.args)}`);
    removed.add(groupOf(h.args));
  }
  // Inserted in order: each after the ones before it at the same place.
  const shift = new Map<number, number>();
  for (const w of wanted) {
    if (w.p.kind === 'before') {
      const index = w.p.index;
      const k = shift.get(index) ?? 0;
      shift.set(index, k + 1);
      const before = [...shift.entries()].filter(([i]) => i < index).reduce((s, [, c]) => s + c, 0);
      out.filter.push(`-I FORWARD ${index + before + k + 1} ${formatArgs(w.args)}`);
    } else out.filter.push(`-A FORWARD ${formatArgs(w.args)}`);
    added.add(groupOf(w.args));
  }
}

/** nat POSTROUTING: ours at its head, in order. */
function natLines(
  family: Family,
  nat: SavedTable | undefined,
  forwards: readonly RouteForward[],
  out: RouteEdit,
  added: Set<string>,
  removed: Set<string>,
): void {
  const masq = masqueradeArgs(family, forwards);
  const natHave = chainRules(nat, 'POSTROUTING').filter((r) => isRouteArgs(r.args));
  if (natHave.length === masq.length && natHave.every((r, i) => commentOf(r.args) === commentOf(masq[i]!))) return;
  for (const r of natHave) {
    out.nat.push(`-D POSTROUTING ${formatArgs(r.args)}`);
    removed.add(groupOf(r.args));
  }
  masq.forEach((args, i) => {
    out.nat.push(`-I POSTROUTING ${i + 1} ${formatArgs(args)}`);
    added.add(groupOf(args));
  });
}

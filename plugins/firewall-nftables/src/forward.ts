/**
 * A router's forwarded paths in nftables (issue 26, ADR 0038): from the tunnel interface to a route
 * group's prefixes, what the policy allows and the replies, in the found firewall's own terms.
 *
 * - Adopted: marked rules (`meshp:route/<group>/<hash>`) in every found forward-hook filter chain
 *   that drops, placed by the one placement rule of the input path (core's placeOpening, ADR 0008):
 *   after the chain's partial denials, before its first total drop, `ct state != invalid` where the
 *   chain keeps invalid packets out. An accept in meshp's own table would not do: a drop in any base
 *   chain is final, an accept is not (docs/firewalls.md pitfall 1).
 * - Converged: the same accepts in the derived table's forward chain (derived.ts).
 * - Masquerade: a nat postrouting chain of meshp's own (`inet meshp_route`), in both modes: the first
 *   nat chain that maps a connection decides it, so it runs just before srcnat's usual priority.
 *
 * A rule's comment carries a hash of what it says and where: present and wanted compare by comment
 * and chain. Only rules so marked (and meshp's own table) are ever deleted; a reload that wipes them
 * gets them back at the next reconcile (the agent reconciles on the watch).
 */
import { createHash } from 'node:crypto';
import type { RouteForward, RoutePorts } from '@meshp/core';
import type { Placement } from '@meshp/core/net';
import { MARK, ROUTE_NAT_TABLE, classifyTable, filterChains, rulesOf } from './classify.js';
import { Placements } from './plan.js';
import { chainKey, tableKey, type NftChain, type NftRule, type Ruleset } from './schema.js';
import type { Shape } from './shape.js';

/** The ids of the route rules: never read as openings, never deleted by the openings' ensure. */
export const ROUTE_ID = 'route/';
export const ROUTE_MARK = MARK + ROUTE_ID;
/** meshp's own nat table for the masquerade. */
export const ROUTE_TABLE = ROUTE_NAT_TABLE;

export const isRouteRule = (r: NftRule): boolean => r.comment?.startsWith(ROUTE_MARK) ?? false;

type Fam = 'ip' | 'ip6';
const FAMS: readonly Fam[] = ['ip', 'ip6'];
const ofFam = (xs: readonly string[], f: Fam) => xs.filter((x) => x.includes(':') === (f === 'ip6'));
const set = (xs: readonly string[]) => (xs.length === 1 ? xs[0]! : `{ ${xs.join(', ')} }`);

/** One rule body in nft's syntax (no comment), with the comment that names it. */
export interface RouteLine {
  group: string;
  body: string;
  comment: string;
}

function commentOf(group: string, where: string, body: string): string {
  const h = createHash('sha256').update(`${where}\n${body}`).digest('hex').slice(0, 12);
  return `${ROUTE_MARK}${group}/${h}`;
}

function portMatch(p: RoutePorts): string {
  return p.protocol === 'any' ? '' : `${p.protocol} dport ${p.range ?? '1-65535'} `;
}

/**
 * The accepts of one forward in one chain family (`inet` both, `ip`/`ip6` its own): replies both
 * ways, then each allowed source set and port to the prefixes. `valid`: new connections only when not
 * in conntrack state invalid.
 */
export function acceptBodies(f: RouteForward, tableFamily: string, valid: boolean): string[] {
  const ifq = JSON.stringify(f.iif);
  const out: string[] = [];
  for (const fam of FAMS) {
    if ((tableFamily === 'ip' && fam !== 'ip') || (tableFamily === 'ip6' && fam !== 'ip6')) continue;
    const to = ofFam(f.to, fam);
    if (!to.length) continue;
    out.push(`iifname ${ifq} ${fam} daddr ${set(to)} ct state established,related accept`);
    out.push(`oifname ${ifq} ${fam} saddr ${set(to)} ct state established,related accept`);
    for (const a of f.allow) {
      const from = ofFam(a.from, fam);
      if (!from.length) continue;
      for (const p of a.ports) {
        out.push(`iifname ${ifq} ${fam} saddr ${set(from)} ${fam} daddr ${set(to)} ${portMatch(p)}${valid ? 'ct state != invalid ' : ''}accept`);
      }
    }
  }
  return out;
}

/** The masquerade of one forward: the allowed mesh sources toward its prefixes, leaving by any other interface. */
export function masqueradeBodies(f: RouteForward): string[] {
  if (!f.masquerade) return [];
  const out: string[] = [];
  for (const fam of FAMS) {
    const to = ofFam(f.to, fam);
    const from = [...new Set(f.allow.flatMap((a) => ofFam(a.from, fam)))].sort();
    if (to.length && from.length) out.push(`oifname != ${JSON.stringify(f.iif)} ${fam} saddr ${set(from)} ${fam} daddr ${set(to)} masquerade`);
  }
  return out;
}

/** The accept lines of every forward for a chain of the derived table (inet): marked like the found ones. */
export function derivedAcceptLines(forwards: readonly RouteForward[], where: string): RouteLine[] {
  return forwards.flatMap((f) => acceptBodies(f, 'inet', false).map((body) => ({ group: f.group, body, comment: commentOf(f.group, where, body) })));
}

/** The placement of a forward's accepts in one found chain, read as the input path's openings are (one door per forward: its first port). */
function placementOf(places: Placements, chain: NftChain, f: RouteForward): Placement {
  const from = f.allow.flatMap((a) => a.from);
  const p = f.allow.flatMap((a) => a.ports)[0];
  const fam: Fam = from.some((x) => !x.includes(':')) ? 'ip' : 'ip6';
  const shape: Shape = {
    id: `${ROUTE_ID}${f.group}`,
    nf: fam,
    cidrs: ofFam(from, fam),
    negate: false,
    protocol: p && p.protocol !== 'any' ? p.protocol : 'tcp',
    port: Number((p?.range ?? '1').split('-')[0]),
    match: 'ct',
    verdict: 'accept',
  };
  return places.of(chain, shape, 'forwarded');
}

export interface RoutePlan {
  /** nft's syntax, one transaction: deletions, then additions, then meshp's nat table. '' when nothing changes. */
  script: string;
  added: string[];
  removed: string[];
  refused: { id: string; reason: string }[];
}

const nameOf = (c: { family: string; table: string; name?: string; chain?: string }) => `${c.family} ${c.table} ${c.name ?? c.chain}`;

/** What the found ruleset needs for these forwards (adopted: `found` true) or for the nat table alone (converged). */
export function planRoutes(rs: Ruleset, forwards: readonly RouteForward[], found: boolean): RoutePlan {
  const places = new Placements(rs);
  const lines: string[] = [];
  const added = new Set<string>();
  const removed = new Set<string>();
  const refused: { id: string; reason: string }[] = [];
  const want = new Map<string, { chain: NftChain; body: string; comment: string; place: Placement; group: string }>();
  const chains = found && forwards.length ? filterChains(rs, 'forward') : [];
  for (const chain of chains) {
    for (const f of forwards) {
      const p = placementOf(places, chain, f);
      if (p.kind === 'none') continue;
      if (p.kind === 'refused') {
        refused.push({ id: `${ROUTE_ID}${f.group}`, reason: `${p.rule}: ${p.why}` });
        continue;
      }
      for (const body of acceptBodies(f, chain.family, p.invalid === true)) {
        const comment = commentOf(f.group, chainKey(chain), body);
        want.set(`${chainKey(chain)}|${comment}`, { chain, body, comment, place: p, group: f.group });
      }
    }
  }
  // Present route rules in the found tables: kept where wanted and well placed, else deleted.
  const foundTables = new Set(rs.tables.filter((t) => classifyTable(t, rs) === 'found').map(tableKey));
  const kept = new Set<string>();
  for (const c of rs.chains) {
    if (!foundTables.has(tableKey(c))) continue;
    rulesOf(rs, c).forEach((r, at) => {
      if (!isRouteRule(r)) return;
      const key = `${chainKey(c)}|${r.comment}`;
      const w = want.get(key);
      const placed = w && (w.place.kind === 'before' ? at > w.place.after && at < w.place.index : w.place.kind === 'end' ? at > w.place.after : false);
      if (w && placed && !kept.has(key)) kept.add(key);
      else {
        lines.push(`delete rule ${nameOf(r)} handle ${r.handle}`);
        removed.add(r.comment!.slice(MARK.length).split('/').slice(0, 2).join('/'));
      }
    });
  }
  for (const [key, w] of want) {
    if (kept.has(key)) continue;
    const rule = `${w.body} comment ${JSON.stringify(w.comment)}`;
    const before = w.place.kind === 'before' ? rulesOf(rs, w.chain)[w.place.index] : undefined;
    lines.push(before ? `insert rule ${nameOf(w.chain)} handle ${before.handle} ${rule}` : `add rule ${nameOf(w.chain)} ${rule}`);
    added.add(`${ROUTE_ID}${w.group}`);
  }
  lines.push(...natLines(rs, forwards));
  const refusedIds = new Set(refused.map((r) => r.id));
  return {
    script: lines.length ? lines.join('\n') + '\n' : '',
    added: [...added].filter((x) => !refusedIds.has(x)).sort(),
    removed: [...removed].filter((x) => !added.has(x)).sort(),
    refused,
  };
}

/** meshp's nat table as the forwards want it: rebuilt whole when it differs, deleted when no masquerade is wanted. */
function natLines(rs: Ruleset, forwards: readonly RouteForward[]): string[] {
  const T = `inet ${ROUTE_TABLE}`;
  const bodies = forwards.flatMap((f) => masqueradeBodies(f).map((body) => ({ body, comment: commentOf(f.group, `${T} postrouting`, body) })));
  const present = rs.tables.some((t) => t.family === 'inet' && t.name === ROUTE_TABLE);
  const have = rs.rules.filter((r) => r.family === 'inet' && r.table === ROUTE_TABLE).map((r) => r.comment ?? '');
  const chainOk = rs.chains.some((c) => c.family === 'inet' && c.table === ROUTE_TABLE && c.name === 'postrouting' && c.hook === 'postrouting');
  if (!bodies.length) return present ? [`delete table ${T}`] : [];
  if (present && chainOk && have.length === bodies.length && bodies.every((b, i) => have[i] === b.comment)) return [];
  return [
    `add table ${T}`,
    `delete table ${T}`,
    `add table ${T}`,
    `add chain ${T} postrouting { type nat hook postrouting priority srcnat - 1; policy accept; }`,
    ...bodies.map((b) => `add rule ${T} postrouting ${b.body} comment ${JSON.stringify(b.comment)}`),
  ];
}

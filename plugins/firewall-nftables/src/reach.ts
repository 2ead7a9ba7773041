/**
 * Where each door is reachable from now: the live ruleset's base chains on the door's hook, read
 * into core's reach rules (reach-rule.ts) and walked there. Only the tables that filter for this
 * kind count — the found firewall's and the mesh's own; Docker's and iptables-nft's tables are
 * Docker's NAT doing its job (a published port is forwarded by Docker unless one of those rules
 * drops it), and the iptables kinds answer for the rest of them.
 */
import type { Door, Reach } from '@meshp/core';
import { reachThrough, type IpFamily, type ReachChain, type ReachRule } from '@meshp/core/net';
import { classifyTable, isMarked, jumpTarget, type TableOwner } from './classify.js';
import { markAliasesOf } from './marks.js';
import { reachRule, type NamedSets } from './reach-rule.js';
import { chainKey, tableKey, type NftChain, type NftRule, type Ruleset } from './schema.js';

const COUNTED: readonly TableOwner[] = ['found', 'mesh', 'derived'];
const FAMILIES: Record<string, readonly IpFamily[]> = { ip: [4], ip6: [6], inet: [4, 6] };

/** How an operator finds a rule: its chain and handle, and what it does. */
function labelOf(rule: NftRule): string {
  const verdict = rule.expr
    .map((e) => Object.keys(e)[0])
    .filter((k) => !['match', 'counter', 'log'].includes(k!))
    .join(' ');
  const target = jumpTarget(rule);
  return `${rule.family} ${rule.table} ${rule.chain} handle ${rule.handle ?? '?'} (${verdict || 'no verdict'}${target ? ` ${target}` : ''})`;
}

/** The named sets of one table (by its key), from the listed objects. */
export function setsOf(rs: Ruleset, table: string): NamedSets {
  const out = new Map<string, unknown[]>();
  for (const o of rs.objects) {
    const set = (o as { set?: { family: string; table: string; name: string; elem?: unknown[] } }).set;
    if (set && tableKey(set as { family: string; table?: string; name: string }) === table) out.set(set.name, set.elem ?? []);
  }
  return out;
}

/** One base chain of a found table as core's reach chain, the mesh's own rules not counted as found. */
export function reachChainOf(rs: Ruleset, chain: NftChain): ReachChain {
  const t = tableKey(chain);
  const rulesByChain = new Map<string, NftRule[]>();
  for (const r of rs.rules) {
    if (tableKey(r) !== t) continue;
    if (!rulesByChain.has(r.chain)) rulesByChain.set(r.chain, []);
    rulesByChain.get(r.chain)!.push(r);
  }
  const sets = setsOf(rs, t);
  const marks = markAliasesOf(rs);
  const read = (name: string) =>
    (rulesByChain.get(name) ?? []).map((r, i) => ({ ...reachRule(r, !isMarked(r), sets, rs.arrivals, marks.get(chainKey(r))?.[i]), label: labelOf(r) }));
  const regular = new Map<string, readonly ReachRule[]>();
  for (const c of rs.chains) if (tableKey(c) === t && !c.hook) regular.set(c.name, read(c.name));
  return { policy: chain.policy ?? 'accept', families: FAMILIES[chain.family] ?? [4, 6], rules: read(chain.name), regular, label: chainKey(chain) };
}

/** The base chains on `hook` of the tables that count, read once per ruleset. */
export function reachChains(rs: Ruleset, hook: 'input' | 'forward'): ReachChain[] {
  const counted = new Map(rs.tables.filter((t) => COUNTED.includes(classifyTable(t, rs))).map((t) => [tableKey(t), classifyTable(t, rs)]));
  const setCache = new Map<string, NamedSets>();
  const setsByTable = (t: string) => setCache.get(t) ?? setCache.set(t, setsOf(rs, t)).get(t)!;
  const byChain = new Map<string, NftRule[]>();
  for (const r of rs.rules) {
    if (!counted.has(tableKey(r))) continue;
    const k = chainKey(r);
    if (!byChain.has(k)) byChain.set(k, []);
    byChain.get(k)!.push(r);
  }
  const marks = markAliasesOf(rs);
  const read = (c: NftChain) =>
    (byChain.get(chainKey(c)) ?? []).map((r, i) => ({
      ...reachRule(r, counted.get(tableKey(r)) === 'found' && !isMarked(r), setsByTable(tableKey(r)), rs.arrivals, marks.get(chainKey(c))?.[i]),
      label: labelOf(r),
    }));
  const regular = new Map<string, Map<string, readonly ReachRule[]>>();
  for (const c of rs.chains) {
    if (!counted.has(tableKey(c)) || c.hook) continue;
    const t = tableKey(c);
    if (!regular.has(t)) regular.set(t, new Map());
    regular.get(t)!.set(c.name, read(c));
  }
  return rs.chains
    .filter((c) => counted.has(tableKey(c)) && c.hook === hook && (c.type ?? 'filter') === 'filter' && FAMILIES[c.family])
    .map((c) => ({
      policy: c.policy ?? 'accept',
      families: FAMILIES[c.family]!,
      rules: read(c),
      regular: regular.get(tableKey(c)) ?? new Map(),
      label: chainKey(c),
    }));
}

/** Each door's reach through the ruleset, in the order asked. */
export function reachOfRuleset(rs: Ruleset, doors: readonly Door[], explain = false): Reach[] {
  const chains = { incoming: reachChains(rs, 'input'), forwarded: reachChains(rs, 'forward') };
  return doors.map((d) => reachThrough(chains[d.path], d, explain));
}

/**
 * Whose is each table? Only "found" tables are this kind's to open, count and retire.
 */
import { chainKey, tableKey, verdictOf, type NftChain, type NftRule, type NftTable, type Ruleset } from './schema.js';

export const MESH_TABLE = 'meshp';
export const DERIVED_TABLE = 'meshp_derived';
/** The tunnel plugin's tables, one per interface (`inet meshp_wg_IF`): the mesh's own, never found. */
export const TUNNEL_TABLE_PREFIX = 'meshp_wg_';
export const MARK = 'meshp:';
/** meshp's nat table for a router's masquerade (forward.ts, issue 26). */
export const ROUTE_NAT_TABLE = 'meshp_route';
/** The set in the mesh table whose one element names the last batch committed (see receiptLines). */
export const RECEIPT_SET = 'receipt';

export type TableOwner =
  | 'found' // the found nftables firewall's
  | 'mesh' // our refusals table
  | 'derived' // our converged-node table
  | 'tunnel' // the tunnel plugin's filter on its interface
  | 'route' // a router's masquerade (forward.ts)
  | 'firewalld' // a different kind
  | 'iptables-nft' // the iptables plugin's (comments invisible to nft -j, docs/firewalls.md pitfall 7)
  | 'docker' // the container engine's (nftables backend)
  | 'other'; // arp, bridge, netdev: not on the IP input/forward path

const IPTABLES_TABLES = new Set(['filter', 'nat', 'mangle', 'raw', 'security']);
const IPTABLES_BUILTIN = new Set(['INPUT', 'FORWARD', 'OUTPUT', 'PREROUTING', 'POSTROUTING']);

export function isMarked(rule: NftRule): boolean {
  return rule.comment?.startsWith(MARK) ?? false;
}

export function markedId(rule: NftRule): string | null {
  return isMarked(rule) ? rule.comment!.slice(MARK.length) : null;
}

interface Index {
  rulesByTable: Map<string, NftRule[]>;
  rulesByChain: Map<string, NftRule[]>;
  owners: Map<string, TableOwner>;
  /** Regular chains that drop, directly or through their own jumps. */
  dropping: Map<string, boolean>;
}

const indexes = new WeakMap<Ruleset, Index>();

/** Rules grouped once per listing: a ruleset of thousands of rules is read in linear time. */
function index(rs: Ruleset): Index {
  let ix = indexes.get(rs);
  if (!ix) {
    ix = { rulesByTable: new Map(), rulesByChain: new Map(), owners: new Map(), dropping: new Map() };
    for (const r of rs.rules) {
      const t = tableKey(r);
      const c = chainKey(r);
      if (!ix.rulesByTable.has(t)) ix.rulesByTable.set(t, []);
      if (!ix.rulesByChain.has(c)) ix.rulesByChain.set(c, []);
      ix.rulesByTable.get(t)!.push(r);
      ix.rulesByChain.get(c)!.push(r);
    }
    indexes.set(rs, ix);
  }
  return ix;
}

export function classifyTable(table: NftTable, rs: Ruleset): TableOwner {
  const ix = index(rs);
  const key = tableKey(table);
  let owner = ix.owners.get(key);
  if (!owner) {
    owner = classify(table, rs, ix.rulesByTable.get(key) ?? []);
    ix.owners.set(key, owner);
  }
  return owner;
}

function classify(table: NftTable, rs: Ruleset, rules: NftRule[]): TableOwner {
  const key = tableKey(table);
  if (table.family === 'inet' && table.name === MESH_TABLE) return 'mesh';
  if (table.family === 'inet' && table.name === DERIVED_TABLE) return 'derived';
  if (table.family === 'inet' && table.name.startsWith(TUNNEL_TABLE_PREFIX)) return 'tunnel';
  if (table.family === 'inet' && table.name === ROUTE_NAT_TABLE) return 'route';
  if (table.name === 'firewalld') return 'firewalld';
  if (table.name.startsWith('docker')) return 'docker';
  if (table.family !== 'ip' && table.family !== 'ip6' && table.family !== 'inet') return 'other';
  if (rules.some((r) => r.expr.some((e) => 'xt' in e))) return 'iptables-nft';
  const base = rs.chains.filter((c) => tableKey(c) === key && c.hook);
  if (table.family !== 'inet' && IPTABLES_TABLES.has(table.name) && base.length > 0 && base.every((c) => IPTABLES_BUILTIN.has(c.name))) {
    return 'iptables-nft';
  }
  return 'found';
}

export function tablesOwnedBy(rs: Ruleset, owner: TableOwner): NftTable[] {
  return rs.tables.filter((t) => classifyTable(t, rs) === owner);
}

export function rulesOf(rs: Ruleset, chain: NftChain): NftRule[] {
  return index(rs).rulesByChain.get(chainKey(chain)) ?? [];
}

export function isDropRule(rule: NftRule): boolean {
  const v = verdictOf(rule);
  return v === 'drop' || v === 'reject';
}

/** The regular chain a rule jumps or goes to (same table), if any. */
export function jumpTarget(rule: NftRule): string | null {
  for (const e of rule.expr) {
    const v = (e.jump ?? e.goto) as { target?: unknown } | undefined;
    if (v && typeof v.target === 'string') return v.target;
  }
  return null;
}

/** A regular chain drops when one of its rules drops, or jumps to a chain that does (the kernel refuses jump loops; `seen` guards anyway). */
function regularDrops(rs: Ruleset, family: string, table: string, name: string, seen = new Set<string>()): boolean {
  const ix = index(rs);
  const key = `${family} ${table} ${name}`;
  const known = ix.dropping.get(key);
  if (known !== undefined) return known;
  if (seen.has(key)) return false;
  seen.add(key);
  const rules = ix.rulesByChain.get(key) ?? [];
  const drops = rules.some((r) => !isMarked(r) && (isDropRule(r) || jumpsToDrop(rs, r, seen)));
  ix.dropping.set(key, drops);
  return drops;
}

function jumpsToDrop(rs: Ruleset, rule: NftRule, seen?: Set<string>): boolean {
  const target = jumpTarget(rule);
  return target !== null && regularDrops(rs, rule.family, rule.table, target, seen);
}

/** A rule that can drop: it drops or rejects, or it jumps (goes) to a regular chain that does. */
export function isDropPoint(rs: Ruleset, rule: NftRule): boolean {
  return isDropRule(rule) || jumpsToDrop(rs, rule);
}

/** A base chain that drops: policy drop, or a rule that drops, rejects or jumps to a chain that drops. */
export function chainDrops(rs: Ruleset, chain: NftChain): boolean {
  return chain.policy === 'drop' || rulesOf(rs, chain).some((r) => !isMarked(r) && isDropPoint(rs, r));
}

/** The sighting's "active": any found table with a drop policy or a drop/reject rule. */
export function foundActive(rs: Ruleset): boolean {
  const found = new Set(tablesOwnedBy(rs, 'found').map(tableKey));
  return (
    rs.chains.some((c) => found.has(tableKey(c)) && c.hook && c.policy === 'drop') ||
    rs.rules.some((r) => found.has(tableKey(r)) && !isMarked(r) && isDropRule(r))
  );
}

/** Filter base chains of found tables on a hook: where the placement rule looks for openings of that path. */
export function filterChains(rs: Ruleset, hook: 'input' | 'forward'): NftChain[] {
  const found = new Set(tablesOwnedBy(rs, 'found').map(tableKey));
  // A chain that drops nothing (no drop policy, no drop, no jump to one) needs no opening: not read further.
  return rs.chains.filter((c) => c.hook === hook && (c.type ?? 'filter') === 'filter' && found.has(tableKey(c)) && chainDrops(rs, c));
}

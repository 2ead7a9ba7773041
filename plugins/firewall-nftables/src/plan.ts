/**
 * What `ensure` must change: our marked rules wanted in every found base chain that drops on
 * the opening's path, refusals in the mesh's own table; everything else marked goes, nothing
 * unmarked is ever touched.
 */
import type { Opening } from '@meshp/core';
import { MESH_TABLE, classifyTable, droppingChains, firstDrop, markedId, rulesOf } from './classify.js';
import { buildRule, parseShape, shapeKey, shapesFor, type Shape } from './shape.js';
import { chainKey, tableKey, type Command, type NftChain, type NftRule, type Ruleset } from './schema.js';

/** One rule to add: its shape, the chain, and the rule to insert it before (null: append). */
export interface Addition {
  shape: Shape;
  chain: NftChain;
  before: NftRule | null;
}

export interface EnsurePlan {
  /** The batch as nft JSON commands (built when first read). */
  readonly commands: Command[];
  /** Deletions and the mesh table's setup: the commands before the additions. */
  head: Command[];
  additions: Addition[];
  added: string[];
  removed: string[];
}

export function additionCommand(a: Addition): Command {
  const rule = buildRule(a.shape, { family: a.chain.family, table: a.chain.table, chain: a.chain.name });
  if (!a.before) return { add: { rule } };
  rule.handle = a.before.handle;
  return { insert: { rule } };
}

function makePlan(head: Command[], additions: Addition[], added: string[], removed: string[]): EnsurePlan {
  let commands: Command[] | undefined;
  return {
    get commands() {
      commands ??= [...head, ...additions.map(additionCommand)];
      return commands;
    },
    head,
    additions,
    added,
    removed,
  };
}

interface Want {
  shape: Shape;
  chain: NftChain;
  /** chainKey(chain), computed once per chain. */
  where: string;
}

const MESH_CHAINS: Record<'incoming' | 'forwarded', NftChain> = {
  incoming: { family: 'inet', table: MESH_TABLE, name: 'input', type: 'filter', hook: 'input', prio: 0, policy: 'accept' },
  forwarded: { family: 'inet', table: MESH_TABLE, name: 'forward', type: 'filter', hook: 'forward', prio: 0, policy: 'accept' },
};

export function wanted(rs: Ruleset, openings: readonly Opening[], refusals: readonly Opening[], privateRange?: string): Want[] {
  const out: Want[] = [];
  const accepts = openings.filter((o) => o.action === 'accept');
  const drops = [...refusals, ...openings.filter((o) => o.action === 'drop')];
  for (const [hook, path] of [['input', 'incoming'], ['forward', 'forwarded']] as const) {
    for (const chain of droppingChains(rs, hook)) {
      const where = chainKey(chain);
      for (const o of accepts) {
        if (o.path !== path) continue;
        for (const shape of shapesFor(o, chain.family)) out.push({ shape, chain, where });
      }
    }
  }
  for (const r of drops) {
    const chain = MESH_CHAINS[r.path];
    const where = chainKey(chain);
    for (const shape of shapesFor({ ...r, action: 'drop' }, 'inet', privateRange)) out.push({ shape, chain, where });
  }
  return out;
}

function wantKey(where: string, shape: Shape): string {
  return `${where}|${shapeKey(shape)}`;
}

/** Marked rules in tables we may change (found tables and the mesh table), in chain order. */
function presentMarked(rs: Ruleset): NftRule[] {
  const ours = new Set(rs.tables.filter((t) => ['found', 'mesh'].includes(classifyTable(t, rs))).map(tableKey));
  return rs.rules.filter((r) => ours.has(tableKey(r)) && markedId(r) !== null);
}

export function planEnsure(rs: Ruleset, openings: readonly Opening[], refusals: readonly Opening[], privateRange?: string): EnsurePlan {
  const wants = wanted(rs, openings, refusals, privateRange);
  const byKey = new Map(wants.map((w) => [wantKey(w.where, w.shape), w]));
  const satisfied = new Set<string>();
  const deletes: Command[] = [];
  const deletedIds = new Set<string>();
  const chainsByKey = new Map(rs.chains.map((c) => [chainKey(c), c]));
  const positions = positionsOf(rs);

  for (const rule of presentMarked(rs)) {
    const id = markedId(rule)!;
    const shape = parseShape(rule, id);
    const key = shape ? wantKey(chainKey(rule), shape) : null;
    const chain = chainsByKey.get(chainKey(rule));
    if (key && byKey.has(key) && !satisfied.has(key) && chain && effective(rs, chain, rule, positions)) {
      satisfied.add(key);
      continue;
    }
    deletes.push({ delete: { rule: { family: rule.family, table: rule.table, chain: rule.chain, handle: rule.handle } } });
    deletedIds.add(id);
  }

  const commands: Command[] = [...deletes];
  const meshTable = rs.tables.find((t) => classifyTable(t, rs) === 'mesh');
  const meshWanted = wants.some((w) => w.chain.table === MESH_TABLE);
  if (meshWanted) {
    if (!meshTable) commands.push({ add: { table: { family: 'inet', name: MESH_TABLE } } });
    for (const c of Object.values(MESH_CHAINS)) {
      if (!chainsByKey.has(chainKey(c))) commands.push({ add: { chain: { ...c } } });
    }
  } else if (meshTable) {
    commands.push({ delete: { table: { family: 'inet', name: MESH_TABLE } } });
  }

  const added = new Set<string>();
  const additions: Addition[] = [];
  const drops = new Map<string, NftRule | null>();
  for (const [key, w] of byKey) {
    if (satisfied.has(key)) continue;
    let before = drops.get(w.where);
    if (before === undefined) drops.set(w.where, (before = w.chain.table === MESH_TABLE ? null : firstDrop(rs, w.chain)));
    additions.push({ shape: w.shape, chain: w.chain, before });
    added.add(w.shape.id);
  }
  const wantedIds = new Set(wants.map((w) => w.shape.id));
  const removed = [...deletedIds].filter((id) => !wantedIds.has(id));
  if (commands.length === 0 && additions.length === 0) return makePlan([], [], [], []);
  return makePlan(commands, additions, [...added], removed);
}

/** An accept after the chain's first drop never fires: it is replaced. Handles grow, positions do not: compare positions. */
function effective(rs: Ruleset, chain: NftChain, rule: NftRule, positions: Map<NftRule, number>): boolean {
  if (chain.table === MESH_TABLE) return true;
  const drop = firstDrop(rs, chain);
  if (!drop) return true;
  return positions.get(rule)! < positions.get(drop)!;
}

function positionsOf(rs: Ruleset): Map<NftRule, number> {
  const out = new Map<NftRule, number>();
  for (const c of rs.chains) rulesOf(rs, c).forEach((r, i) => out.set(r, i));
  return out;
}

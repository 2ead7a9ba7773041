/**
 * What `ensure` must change: our marked rules wanted in every found base chain that drops on
 * the opening's path, refusals in the mesh's own table; everything else marked goes, nothing
 * unmarked is ever touched.
 */
import type { Opening } from '@meshp/core';
import { cidrSpan, placeOpening, portClasses, spansToSet, wholeOf, type AddressSet, type Placement, type ReachChain } from '@meshp/core/net';
import { MESH_TABLE, classifyTable, filterChains, markedId, rulesOf } from './classify.js';
import { reachChainOf } from './reach.js';
import { buildRule, parseShape, shapeKey, type Shape } from './shape.js';
import { chainKey, tableKey, type Command, type NftChain, type NftRule, type Ruleset } from './schema.js';
import { Wants, type OpeningPath } from './wants.js';

/**
 * One rule to add: its shape, the chain, and the rule to insert it before (null: append).
 * `after`: the rule that stays right before `before` once the batch's deletions are done; the
 * nft script places the rule after it — the same position, but the kernel finds that handle at
 * once, where inserting a thousand rules before the same drop walks past every rule inserted so
 * far, each time. (nft 1.0.6 ignores a JSON `add`'s handle and appends: the JSON batch inserts.)
 */
export interface Addition {
  shape: Shape;
  chain: NftChain;
  before: NftRule | null;
  after?: NftRule | null;
}

export interface EnsurePlan {
  /** The batch as nft JSON commands (built when first read). */
  readonly commands: Command[];
  /** Deletions and the mesh table's setup: the commands before the additions. */
  head: Command[];
  additions: Addition[];
  added: string[];
  removed: string[];
  /** The mesh table is there once the batch has run: it can carry the batch's receipt. */
  meshAfter: boolean;
}

export function additionCommand(a: Addition): Command {
  const rule = buildRule(a.shape, { family: a.chain.family, table: a.chain.table, chain: a.chain.name });
  if (!a.before) return { add: { rule } };
  rule.handle = a.before.handle;
  return { insert: { rule } };
}

function makePlan(head: Command[], additions: Addition[], added: string[], removed: string[], meshAfter: boolean): EnsurePlan {
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
    meshAfter,
  };
}

interface Want {
  shape: Shape;
  chain: NftChain;
  /** chainKey(chain), computed once per chain. */
  where: string;
  /** where + "|" + shapeKey(shape). */
  key: string;
  /** Where it goes in a found chain; null in the mesh's own table. */
  place: Placement | null;
}

const MESH_CHAINS: Record<OpeningPath, NftChain> = {
  incoming: { family: 'inet', table: MESH_TABLE, name: 'input', type: 'filter', hook: 'input', prio: 0, policy: 'accept' },
  forwarded: { family: 'inet', table: MESH_TABLE, name: 'forward', type: 'filter', hook: 'forward', prio: 0, policy: 'accept' },
};

/** An accept the found chain leaves no place for (see core's placeOpening). */
export interface Unplaceable {
  id: string;
  reason: string;
}

/** Where each accept goes in each found base chain, by the placement rule; read once per chain. */
export class Placements {
  readonly #chains = new Map<string, { rc: ReachChain; classOf: (port: number) => number }>();
  readonly #cache = new Map<string, Placement>();

  constructor(private readonly rs: Ruleset) {}

  of(chain: NftChain, shape: Shape, path: OpeningPath): Placement {
    const where = chainKey(chain);
    let c = this.#chains.get(where);
    if (!c) {
      const rc = reachChainOf(this.rs, chain);
      this.#chains.set(where, (c = { rc, classOf: portClasses(rc) }));
    }
    // By the port's class in this chain (core's portClasses): ports the chain does not tell apart share one placement.
    const key = `${where}|${shape.nf}|${shape.cidrs.join(',')}|${shape.protocol}|${c.classOf(shape.port)}|${path}`;
    let p = this.#cache.get(key);
    if (!p) {
      p = placeOpening(c.rc, { port: shape.port, protocol: shape.protocol, path }, rangeOf(shape));
      this.#cache.set(key, p);
    }
    return p;
  }
}

function rangeOf(s: Shape): AddressSet {
  if (s.nf === 'any') return EVERYWHERE_SET;
  return s.cidrs.length > 0 ? spansToSet(s.cidrs.map(cidrSpan)) : wholeOf([s.nf === 'ip' ? 4 : 6]);
}

const EVERYWHERE_SET = wholeOf([4, 6]);

export function wanted(rs: Ruleset, wants: Wants, places = new Placements(rs), unplaceable: Unplaceable[] = []): Want[] {
  const out: Want[] = [];
  const refused = new Set<string>();
  for (const [hook, path] of [
    ['input', 'incoming'],
    ['forward', 'forwarded'],
  ] as const) {
    for (const chain of filterChains(rs, hook)) {
      const where = chainKey(chain);
      for (const w of wants.accepting(chain.family, path)) {
        const p = places.of(chain, w.shape, path);
        if (p.kind === 'refused') {
          if (!refused.has(w.shape.id)) unplaceable.push({ id: w.shape.id, reason: `${p.rule}: ${p.why}` });
          refused.add(w.shape.id);
        } else if (p.kind !== 'none') {
          // Where the found chain keeps invalid packets out, the accept does too (core's deniesInvalid).
          const shape = p.invalid ? { ...w.shape, valid: true } : w.shape;
          out.push({ shape, chain, where, key: p.invalid ? `${where}|${shapeKey(shape)}` : `${where}|${w.key}`, place: p });
        }
      }
    }
  }
  for (const w of wants.drops) {
    const chain = MESH_CHAINS[w.path];
    const where = chainKey(chain);
    out.push({ shape: w.shape, chain, where, key: `${where}|${w.key}`, place: null });
  }
  // An opening is placed whole or not at all: a refused one writes nothing in any chain.
  return refused.size ? out.filter((w) => !refused.has(w.shape.id)) : out;
}

function wantKey(where: string, shape: Shape): string {
  return `${where}|${shapeKey(shape)}`;
}

/** Marked rules in tables we may change (found tables and the mesh table), in chain order. */
function presentMarked(rs: Ruleset): NftRule[] {
  const ours = new Set(rs.tables.filter((t) => ['found', 'mesh'].includes(classifyTable(t, rs))).map(tableKey));
  // A router's forwarded path (`meshp:route/…`) is forward.ts's, planned beside the openings.
  return rs.rules.filter((r) => ours.has(tableKey(r)) && markedId(r) !== null && !markedId(r)!.startsWith('route/'));
}

export function planEnsure(
  rs: Ruleset,
  openings: readonly Opening[],
  refusals: readonly Opening[],
  privateRange?: string,
  unplaceable: Unplaceable[] = [],
): EnsurePlan {
  const places = new Placements(rs);
  const wants = wanted(rs, new Wants(openings, refusals, privateRange), places, unplaceable);
  const byKey = new Map(wants.map((w) => [w.key, w]));
  const satisfied = new Set<string>();
  const deletes: Command[] = [];
  const deletedIds = new Set<string>();
  const deleted = new Set<NftRule>();
  const chainsByKey = new Map(rs.chains.map((c) => [chainKey(c), c]));
  const positions = positionsOf(rs);

  for (const rule of presentMarked(rs)) {
    const id = markedId(rule)!;
    const shape = parseShape(rule, id);
    let key = shape ? wantKey(chainKey(rule), shape) : null;
    const chain = chainsByKey.get(chainKey(rule));
    let want = key ? byKey.get(key) : undefined;
    // An accept with `ct state != invalid` where no longer needed (the found chain drops every
    // invalid packet above it: core's invalidDropAbove) is stricter, not wrong: it stands, not rewritten.
    if (!want && shape?.valid) {
      const plain = wantKey(chainKey(rule), { ...shape, valid: false });
      if (byKey.has(plain)) [key, want] = [plain, byKey.get(plain)];
    }
    if (key && want && !satisfied.has(key) && chain && effective(want.place, rule, positions)) {
      satisfied.add(key);
      continue;
    }
    deletes.push({ delete: { rule: { family: rule.family, table: rule.table, chain: rule.chain, handle: rule.handle } } });
    deletedIds.add(id);
    deleted.add(rule);
  }

  const commands: Command[] = [...deletes];
  // The mesh table holds the refusals (in its two chains) and the receipt of the last batch: it
  // stays while the mesh has anything in the firewall, its chains only while there are refusals.
  const meshTable = rs.tables.find((t) => classifyTable(t, rs) === 'mesh');
  const refusing = wants.some((w) => w.chain.table === MESH_TABLE);
  const meshAfter = wants.length > 0;
  if (refusing) {
    if (!meshTable) commands.push({ add: { table: { family: 'inet', name: MESH_TABLE } } });
    for (const c of Object.values(MESH_CHAINS)) {
      if (!chainsByKey.has(chainKey(c))) commands.push({ add: { chain: { ...c } } });
    }
  } else if (meshTable && meshAfter) {
    for (const c of Object.values(MESH_CHAINS)) {
      if (chainsByKey.has(chainKey(c))) commands.push({ delete: { chain: { family: c.family, table: c.table, name: c.name } } });
    }
  } else if (meshTable) {
    commands.push({ delete: { table: { family: 'inet', name: MESH_TABLE } } });
  }

  const { added, additions } = additionsOf(rs, byKey, satisfied, deleted, positions);
  const wantedIds = new Set(wants.map((w) => w.shape.id));
  const removed = [...deletedIds].filter((id) => !wantedIds.has(id));
  if (commands.length === 0 && additions.length === 0) return makePlan([], [], [], [], meshAfter);
  return makePlan(commands, additions, [...added], removed, meshAfter);
}

/** The wanted rules not satisfied, each with its anchors; placements are shared by the ports of a class (Placements.of), and so are their anchors. */
function additionsOf(
  rs: Ruleset,
  byKey: ReadonlyMap<string, Want>,
  satisfied: ReadonlySet<string>,
  deleted: ReadonlySet<NftRule>,
  positions: Map<NftRule, number>,
): { added: Set<string>; additions: Addition[] } {
  const added = new Set<string>();
  const additions: Addition[] = [];
  const anchors = new Map<Placement, { before: NftRule; after: NftRule | null }>();
  for (const [key, w] of byKey) {
    if (satisfied.has(key)) continue;
    added.add(w.shape.id);
    if (w.place?.kind !== 'before') {
      additions.push({ shape: w.shape, chain: w.chain, before: null });
      continue;
    }
    let a = anchors.get(w.place);
    if (!a) {
      const before = rulesOf(rs, w.chain)[w.place.index]!;
      anchors.set(w.place, (a = { before, after: keptBefore(rs, w.chain, before, deleted, positions) }));
    }
    additions.push(a.after ? { shape: w.shape, chain: w.chain, before: a.before, after: a.after } : { shape: w.shape, chain: w.chain, before: a.before });
  }
  return { added, additions };
}

/**
 * Whether a present rule stands where the placement rule puts it: below every partial denial,
 * above the total one (the mesh table's rules stand anywhere). Handles grow, positions do not.
 */
function effective(place: Placement | null, rule: NftRule, positions: Map<NftRule, number>): boolean {
  if (!place) return true;
  const at = positions.get(rule)!;
  if (place.kind === 'before') return at > place.after && at < place.index;
  if (place.kind === 'end') return at > place.after;
  return false;
}

/** The rule right before `drop` in its chain once the batch's deletions are done (null: none). */
function keptBefore(rs: Ruleset, chain: NftChain, drop: NftRule, deleted: ReadonlySet<NftRule>, positions: Map<NftRule, number>): NftRule | null {
  const rules = rulesOf(rs, chain);
  for (let i = (positions.get(drop) ?? rules.indexOf(drop)) - 1; i >= 0; i--) {
    if (!deleted.has(rules[i]!)) return rules[i]!;
  }
  return null;
}

function positionsOf(rs: Ruleset): Map<NftRule, number> {
  const out = new Map<NftRule, number>();
  for (const c of rs.chains) rulesOf(rs, c).forEach((r, i) => out.set(r, i));
  return out;
}

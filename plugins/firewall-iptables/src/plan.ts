/**
 * What `ensure` sends: from the live filter table and the wanted openings, the restore lines that
 * remove our stale rules and insert the missing ones just before the found chain's first drop,
 * and the lines that undo them (used when another family's transaction fails).
 */
import type { Door, Opening } from '@meshp/core';
import { cidrSpan, placeOpening, spansToSet, subtract, wholeOf, type AddressSet, type IpFamily, type Placement, type ReachChain } from '@meshp/core/net';
import { DERIVED_PREFIX, DOCKER_USER, hasChain, isForeignChain } from './chains.js';
import { parseCidr, rangesOf, type Family } from './cidr.js';
import { buildArgs, DERIVED_MARK, isDrop, isTerminal, markOf, parseMarked, specKey, targetOf, type MarkedSpec } from './marks.js';
import { reachChain } from './reach.js';
import { chainRules, formatArgs, optionValue, type SavedRule, type SavedTable } from './save-format.js';

/** User chains (not Docker's, not ours) holding a drop or reject: a jump to one is a drop point. */
export function droppingChains(filter: SavedTable | undefined): Set<string> {
  const out = new Set<string>();
  for (const r of filter?.rules ?? []) {
    if (!isForeignChain(r.chain) && isDrop(r.args) && !markOf(r.args)) out.add(r.chain);
  }
  return out;
}

/** A builtin chain drops when its policy is DROP or an unmarked rule in it drops (directly or by a jump). */
export function chainDrops(filter: SavedTable | undefined, chain: string): boolean {
  if (!filter) return false;
  if (filter.chains.find((c) => c.name === chain)?.policy === 'DROP') return true;
  const dropping = droppingChains(filter);
  return chainRules(filter, chain).some((r) => !markOf(r.args) && !dropsInvalidOnly(r.args) && (isDrop(r.args) || dropping.has(targetOf(r.args) ?? '')));
}

export interface Wanted {
  openings: readonly Opening[];
  refusals: readonly Opening[];
  privateRange?: string;
}

function sourcesFor(family: Family, from: readonly string[]): (string | null)[] | null {
  if (from.length === 0) return [null];
  const r = rangesOf(family, from);
  return r.length ? r : null;
}

/**
 * The range a refusal without `from` spares, in this family: its own `except` (the declaration's
 * private range) first, else the plugin's privateRange option. `! -s` takes one range.
 */
export function sparedFor(family: Family, r: Opening, fallback: string | undefined): { text: string } | null {
  const ranges = r.except?.length ? r.except : fallback ? [fallback] : [];
  return ranges.map((c) => parseCidr(c)).find((c) => c.family === family) ?? null;
}

/** An opening the found chain leaves no place for (see core's placeOpening). */
export interface Unplaceable {
  id: string;
  reason: string;
}

/** The sources a marked rule admits, as an address set of its family. */
function rangeOf(family: Family, s: Pick<MarkedSpec, 'source' | 'negated'>): AddressSet {
  const whole = wholeOf([family as IpFamily]);
  if (!s.source) return whole;
  const named = spansToSet([cidrSpan(s.source)]);
  return s.negated ? subtract(whole, named) : named;
}

/**
 * Where one accepting spec goes in its chain, by the placement rule (core's placeOpening): the
 * chain's rules as read for the reach walk, the mesh's own rules not counted. Null: the chain
 * needs no opening for this traffic (nothing in it drops all of it).
 */
export function placementOf(family: Family, filter: SavedTable | undefined, s: MarkedSpec): Placement {
  if (!filter) return { kind: 'none' };
  const chain = reachChain(filter, family, s.path);
  if (!chain) return { kind: 'none' };
  const door = { port: s.port, protocol: s.protocol, path: s.path };
  if (s.chain === DOCKER_USER) return dockerUserPlacement(filter, chain, door, rangeOf(family, s));
  return placeOpening(chain, door, rangeOf(family, s));
}

/**
 * DOCKER-USER is where Docker says the administrator's forward rules go, ahead of its own chains
 * (which the mesh never edits): the placement rule read in it as if it ended in a drop — what it
 * lets through meets Docker's `! -i docker0 -o docker0 -j DROP` for any port Docker does not
 * publish itself. So the accept goes below the administrator's bans there (`-s … -j DROP`), above
 * a drop of all of it, and at the latest just above the chain's closing bare `-j RETURN`.
 */
function dockerUserPlacement(filter: SavedTable, forward: ReachChain, door: Door, range: AddressSet): Placement {
  const raw = chainRules(filter, DOCKER_USER);
  const rules = forward.regular.get(DOCKER_USER) ?? [];
  const ret = raw.findIndex((r) => !markOf(r.args) && r.args.length === 2 && r.args[0] === '-j' && r.args[1] === 'RETURN');
  const head = ret < 0 ? rules : rules.slice(0, ret);
  const p = placeOpening({ ...forward, policy: 'drop', rules: head, label: DOCKER_USER }, door, range);
  if (p.kind !== 'end' || ret < 0) return p;
  return { kind: 'before', index: ret, after: p.after, ...(p.invalid ? { invalid: true } : {}) };
}

/** The marked rules one family's filter table should hold; openings left no place are pushed to `unplaceable`. */
export function desiredSpecs(family: Family, filter: SavedTable | undefined, w: Wanted, unplaceable: Unplaceable[] = []): MarkedSpec[] {
  const out: MarkedSpec[] = [];
  const docker = hasChain(filter, DOCKER_USER);
  for (const o of w.openings) {
    const chain = o.path === 'incoming' ? 'INPUT' : docker ? DOCKER_USER : 'FORWARD';
    const specs: MarkedSpec[] = [];
    let refused: string | null = null;
    for (const source of sourcesFor(family, o.from) ?? []) {
      const spec: MarkedSpec = { id: o.id, chain, source, negated: false, protocol: o.protocol, port: o.port, path: o.path, action: o.action };
      const p = placementOf(family, filter, spec);
      if (p.kind === 'refused') refused ??= `${p.rule}: ${p.why}`;
      // Where the found chain keeps invalid packets out, the accept does too (core's deniesInvalid).
      else if (p.kind !== 'none') specs.push(p.invalid ? { ...spec, valid: true } : spec);
    }
    // An opening is placed whole or not at all: a refused one changes nothing of the found rules.
    if (refused !== null) unplaceable.push({ id: o.id, reason: refused });
    else out.push(...specs);
  }
  for (const r of w.refusals) {
    const priv = sparedFor(family, r, w.privateRange);
    const chain = r.path === 'incoming' ? 'INPUT' : docker ? DOCKER_USER : 'FORWARD';
    const base = { id: r.id, chain, protocol: r.protocol, port: r.port, path: r.path, action: 'drop' as const };
    if (r.from.length > 0) {
      for (const source of rangesOf(family, r.from)) out.push({ ...base, source, negated: false });
    } else if (priv) {
      out.push({ ...base, source: priv.text, negated: true });
    } else {
      out.push({ ...base, source: null, negated: false });
    }
  }
  return out;
}

export interface PresentRule {
  rule: SavedRule;
  /** 1-based position in its chain. */
  index: number;
  spec: MarkedSpec | null;
}

/** Our rules in the found chains (not in the derived chains, not the derived jumps). */
export function presentMarked(filter: SavedTable | undefined): PresentRule[] {
  const out: PresentRule[] = [];
  const pos = new Map<string, number>();
  for (const rule of filter?.rules ?? []) {
    const index = (pos.get(rule.chain) ?? 0) + 1;
    pos.set(rule.chain, index);
    const mark = markOf(rule.args);
    if (!mark || mark === DERIVED_MARK || rule.chain.startsWith(DERIVED_PREFIX)) continue;
    out.push({ rule, index, spec: parseMarked(rule) });
  }
  return out;
}

export interface EnsureEdit {
  lines: string[];
  inverse: string[];
  added: MarkedSpec[];
  removed: MarkedSpec[];
}

/** `-m conntrack --ctstate INVALID -j DROP` drops no valid new connection: an accept goes after it, not before. */
export function dropsInvalidOnly(args: readonly string[]): boolean {
  const state = optionValue(args, '--ctstate') ?? optionValue(args, '--state');
  return state === 'INVALID' && isDrop(args);
}

/** Index (1-based) where an accept goes: just before the first unmarked drop point, else the end (null). */
export function acceptPosition(chain: SavedRule[], dropping: Set<string>): number | null {
  const i = chain.findIndex(
    (r) => !markOf(r.args) && !dropsInvalidOnly(r.args) && (isTerminal(r.args) || dropping.has(targetOf(r.args) ?? '')),
  );
  return i < 0 ? null : i + 1;
}

/** Whether a present accept stands where the placement rule puts it: below every partial denial, above the total one. */
function wellPlaced(p: Placement, index0: number): boolean {
  if (p.kind === 'before') return index0 > p.after && index0 < p.index;
  if (p.kind === 'end') return index0 > p.after;
  return false;
}

export function planEnsure(filter: SavedTable | undefined, desired: MarkedSpec[], family: Family = 4): EnsureEdit {
  const present = presentMarked(filter);
  const wanted = new Map(desired.map((s) => [specKey(s), s]));
  const places = new Map<string, Placement>();
  const placeOf = (s: MarkedSpec): Placement => {
    const k = specKey(s);
    let p = places.get(k);
    if (!p) places.set(k, (p = placementOf(family, filter, s)));
    return p;
  };
  const kept = new Set<string>();
  const stale: PresentRule[] = [];
  for (const p of present) {
    const key = p.spec ? specKey(p.spec) : null;
    // A drop (a refusal) goes on top and stays wherever it is; an accept only where the placement rule puts it.
    const placed = p.spec && (p.spec.action === 'drop' || wellPlaced(placeOf(p.spec), p.index - 1));
    if (key && wanted.has(key) && !kept.has(key) && placed) kept.add(key);
    else stale.push(p);
  }
  const missing = [...wanted.entries()].filter(([k]) => !kept.has(k)).map(([, s]) => s);
  const lines: string[] = [];
  const inverse: string[] = [];
  const staleSet = new Set(stale.map((p) => p.rule));
  // Each chain as it will be, rule by rule, once the stale rules are deleted (the deletions go
  // first) and as each insertion lands: an insertion's number is its anchor's place right then.
  const sim = new Map<string, (SavedRule | null)[]>();
  const chainOf = (name: string) => {
    let c = sim.get(name);
    if (!c) sim.set(name, (c = []));
    return c;
  };
  for (const r of filter?.rules ?? []) if (!staleSet.has(r)) chainOf(r.chain).push(r);
  for (const p of stale) lines.push(`-D ${p.rule.chain} ${formatArgs(p.rule.args)}`);
  const byChain = new Map<string, SavedRule[]>();
  for (const r of filter?.rules ?? []) {
    if (!byChain.has(r.chain)) byChain.set(r.chain, []);
    byChain.get(r.chain)!.push(r);
  }
  for (const s of missing) {
    const text = formatArgs(buildArgs(s));
    const chain = chainOf(s.chain);
    const p = s.action === 'drop' ? null : placeOf(s);
    if (p && p.kind === 'before') {
      const anchor = byChain.get(s.chain)![p.index]!;
      const at = chain.indexOf(anchor);
      chain.splice(at, 0, null);
      lines.push(`-I ${s.chain} ${at + 1} ${text}`);
    } else if (p) {
      chain.push(null);
      lines.push(`-A ${s.chain} ${text}`);
    } else {
      chain.unshift(null);
      lines.push(`-I ${s.chain} 1 ${text}`);
    }
    inverse.push(`-D ${s.chain} ${text}`);
  }
  for (const p of [...stale].sort((a, b) => a.index - b.index)) inverse.push(`-I ${p.rule.chain} ${p.index} ${formatArgs(p.rule.args)}`);
  return { lines, inverse, added: missing, removed: stale.map((p) => p.spec).filter((s): s is MarkedSpec => s !== null) };
}

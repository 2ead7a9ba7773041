/**
 * What `ensure` sends: from the live filter table and the wanted openings, the restore lines that
 * remove our stale rules and insert the missing ones just before the found chain's first drop,
 * and the lines that undo them (used when another family's transaction fails).
 */
import type { Opening } from '@meshp/core';
import { parseCidr, rangesOf, type Family } from './cidr.js';
import { buildArgs, DERIVED_MARK, isDrop, isTerminal, markOf, parseMarked, specKey, targetOf, type MarkedSpec } from './marks.js';
import { chainRules, formatArgs, optionValue, type SavedRule, type SavedTable } from './save-format.js';

export const DOCKER_USER = 'DOCKER-USER';
export const DERIVED_PREFIX = 'MESHP-';

export function hasChain(filter: SavedTable | undefined, name: string): boolean {
  return !!filter?.chains.some((c) => c.name === name);
}

/** Chains that belong to Docker or to the mesh's derived filter: never the found firewall's. */
export function isForeignChain(name: string): boolean {
  return name.startsWith('DOCKER') || name.startsWith(DERIVED_PREFIX);
}

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

/** The marked rules one family's filter table should hold. */
export function desiredSpecs(family: Family, filter: SavedTable | undefined, w: Wanted): MarkedSpec[] {
  const out: MarkedSpec[] = [];
  const docker = hasChain(filter, DOCKER_USER);
  const forwardChain = docker ? DOCKER_USER : chainDrops(filter, 'FORWARD') ? 'FORWARD' : null;
  for (const o of w.openings) {
    const chain = o.path === 'incoming' ? (chainDrops(filter, 'INPUT') ? 'INPUT' : null) : forwardChain;
    if (!chain) continue;
    for (const source of sourcesFor(family, o.from) ?? []) {
      out.push({ id: o.id, chain, source, negated: false, protocol: o.protocol, port: o.port, path: o.path, action: o.action });
    }
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

export function planEnsure(filter: SavedTable | undefined, desired: MarkedSpec[]): EnsureEdit {
  const present = presentMarked(filter);
  const wanted = new Map(desired.map((s) => [specKey(s), s]));
  const kept = new Set<string>();
  const stale: PresentRule[] = [];
  for (const p of present) {
    const key = p.spec ? specKey(p.spec) : null;
    if (key && wanted.has(key) && !kept.has(key)) kept.add(key);
    else stale.push(p);
  }
  const missing = [...wanted.entries()].filter(([k]) => !kept.has(k)).map(([, s]) => s);
  const lines: string[] = [];
  const inverse: string[] = [];
  const staleSet = new Set(stale.map((p) => p.rule));
  // Each chain as it is once the stale rules are deleted (the deletions go first).
  const sim = new Map<string, SavedRule[]>();
  for (const r of filter?.rules ?? []) {
    if (staleSet.has(r)) continue;
    let chain = sim.get(r.chain);
    if (!chain) sim.set(r.chain, (chain = []));
    chain.push(r);
  }
  for (const p of stale) lines.push(`-D ${p.rule.chain} ${formatArgs(p.rule.args)}`);
  const dropping = droppingChains(filter);
  // Where the next accept goes in each chain. Our rules are marked, so they never become the drop
  // point: each insertion at or before it only moves it one down (linear in the rules, not quadratic).
  const acceptAt = new Map<string, number | null>();
  for (const s of missing) {
    const args = buildArgs(s);
    if (!acceptAt.has(s.chain)) acceptAt.set(s.chain, acceptPosition(sim.get(s.chain) ?? [], dropping));
    const next = acceptAt.get(s.chain)!;
    const at = s.action === 'drop' ? 1 : next;
    const text = formatArgs(args);
    if (at === null) {
      lines.push(`-A ${s.chain} ${text}`);
    } else {
      lines.push(`-I ${s.chain} ${at} ${text}`);
      if (next !== null && at <= next) acceptAt.set(s.chain, next + 1);
    }
    inverse.push(`-D ${s.chain} ${text}`);
  }
  for (const p of [...stale].sort((a, b) => a.index - b.index)) inverse.push(`-I ${p.rule.chain} ${p.index} ${formatArgs(p.rule.args)}`);
  return { lines, inverse, added: missing, removed: stale.map((p) => p.spec).filter((s): s is MarkedSpec => s !== null) };
}

export function transaction(lines: readonly string[], table = 'filter', head: readonly string[] = []): string {
  return [`*${table}`, ...head, ...lines, 'COMMIT', ''].join('\n');
}

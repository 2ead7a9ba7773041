/**
 * What `ensure` sends: from the live filter table and the wanted openings, the restore lines that
 * remove our stale rules and insert the missing ones where the placement rule puts them
 * (placement.ts), and the lines that undo them (used when another family's transaction fails).
 */
import type { Opening } from '@meshp/core';
import type { Placement } from '@meshp/core/net';
import { DERIVED_PREFIX, DOCKER_USER, hasChain } from './chains.js';
import { parseCidr, rangesOf, type Family } from './cidr.js';
import { buildArgs, DERIVED_MARK, MARK, markOf, parseMarked, specKey, type MarkedSpec } from './marks.js';
import { placementOf } from './placement.js';
import { formatArgs, type SavedRule, type SavedTable } from './save-format.js';

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
function sparedFor(family: Family, r: Opening, fallback: string | undefined): { text: string } | null {
  const ranges = r.except?.length ? r.except : fallback ? [fallback] : [];
  return ranges.map((c) => parseCidr(c)).find((c) => c.family === family) ?? null;
}

/**
 * One refusal's drops in `chain`, in this family: from each of its `from` ranges; with none, from
 * everywhere outside the range it spares (sparedFor), or from anywhere when it spares none. The
 * found chains' refusals (desiredSpecs) and the derived filter's (derived.ts) are read alike.
 */
export function refusalSpecs(family: Family, r: Opening, chain: string, privateRange: string | undefined): MarkedSpec[] {
  const priv = sparedFor(family, r, privateRange);
  const base = { id: r.id, chain, protocol: r.protocol, port: r.port, path: r.path, action: 'drop' as const };
  if (r.from.length > 0) return rangesOf(family, r.from).map((source) => ({ ...base, source, negated: false }));
  if (priv) return [{ ...base, source: priv.text, negated: true }];
  return [{ ...base, source: null, negated: false }];
}

/** An opening the found chain leaves no place for (see core's placeOpening). */
export interface Unplaceable {
  id: string;
  reason: string;
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
    const chain = r.path === 'incoming' ? 'INPUT' : docker ? DOCKER_USER : 'FORWARD';
    out.push(...refusalSpecs(family, r, chain, w.privateRange));
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
    // A router's forwarded path (`meshp:route/…`) is forward.ts's, planned beside the openings.
    if (!mark || mark === DERIVED_MARK || rule.chain.startsWith(DERIVED_PREFIX) || mark.startsWith(`${MARK}route/`)) continue;
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
    let key = p.spec ? specKey(p.spec) : null;
    // An accept with `! --ctstate INVALID` where no longer needed (the chain drops every invalid
    // packet above it: core's invalidDropAbove) is stricter, not wrong: it stands, not rewritten.
    if (key && p.spec?.valid && !wanted.has(key) && wanted.has(specKey({ ...p.spec, valid: false }))) key = specKey({ ...p.spec, valid: false });
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

/**
 * The mesh's own filter on a converged node: chains MESHP-INPUT and MESHP-FORWARD, jumped to from
 * INPUT and FORWARD at position 1 by rules marked `meshp:derived`. Drop by default on input;
 * on the forward path, published ports (DNAT'ed connections) not declared are dropped.
 */
import type { DerivedFilter } from '@meshp/core';
import { DERIVED_PREFIX, hasChain } from './chains.js';
import { rangesOf, type Family } from './cidr.js';
import { buildArgs, DERIVED_MARK, markOf, type MarkedSpec } from './marks.js';
import { refusalSpecs } from './plan.js';
import { acceptArgs, routeDrops } from './forward.js';
import { formatArgs, transaction, type SavedTable } from './save-format.js';
import { FAMILIES, type IptablesTool } from './tool.js';

export const DERIVED_CHAINS = { INPUT: 'MESHP-INPUT', FORWARD: 'MESHP-FORWARD' } as const;

interface DriverParts {
  tools: Record<Family, IptablesTool>;
  filters(): Promise<Record<Family, SavedTable | undefined>>;
}

function jumpArgs(chain: string): string[] {
  return ['-m', 'comment', '--comment', DERIVED_MARK, '-j', chain];
}

function specs(family: Family, f: DerivedFilter): MarkedSpec[] {
  const out: MarkedSpec[] = [];
  for (const r of f.refusals) {
    const chain = r.path === 'incoming' ? DERIVED_CHAINS.INPUT : DERIVED_CHAINS.FORWARD;
    out.push(...refusalSpecs(family, r, chain, f.privateRange));
  }
  for (const o of f.openings) {
    const chain = o.path === 'incoming' ? DERIVED_CHAINS.INPUT : DERIVED_CHAINS.FORWARD;
    const sources = o.from.length === 0 ? [null] : rangesOf(family, o.from);
    for (const source of sources) out.push({ id: o.id, chain, source, negated: false, protocol: o.protocol, port: o.port, path: o.path, action: 'accept' });
  }
  return out;
}

/** What a first load leaves: undone when a later family fails. */
const JUST_LOADED: SavedTable = {
  name: 'filter',
  chains: Object.values(DERIVED_CHAINS).map((name) => ({ name, policy: null })),
  rules: [
    { chain: 'INPUT', args: jumpArgs(DERIVED_CHAINS.INPUT) },
    { chain: 'FORWARD', args: jumpArgs(DERIVED_CHAINS.FORWARD) },
  ],
};

export function derivedLines(family: Family, filter: SavedTable | undefined, f: DerivedFilter): { head: string[]; lines: string[] } {
  const icmp = family === 6 ? 'ipv6-icmp' : 'icmp';
  const { INPUT: IN, FORWARD: FW } = DERIVED_CHAINS;
  const established = ['-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT'];
  const lines = [`-A ${IN} -i lo -j ACCEPT`, `-A ${IN} ${formatArgs(established)}`, `-A ${IN} -p ${icmp} -j ACCEPT`, `-A ${FW} ${formatArgs(established)}`];
  const all = specs(family, f);
  // Refusals first: a drop is final only if nothing before it accepts.
  for (const s of all.filter((x) => x.action === 'drop')) lines.push(`-A ${s.chain} ${formatArgs(buildArgs(s))}`);
  for (const s of all.filter((x) => x.action === 'accept')) lines.push(`-A ${s.chain} ${formatArgs(buildArgs(s))}`);
  // A router's accepts (forward.ts): what the policy allows to the route groups' prefixes.
  // FORWARD's policy is ACCEPT on a converged node (retire.ts): the rest from the mesh to the prefixes is dropped here.
  for (const args of acceptArgs(family, f.forwards ?? [], FW, false)) lines.push(`-A ${FW} ${formatArgs(args)}`);
  for (const args of routeDrops(family, f.forwards ?? [], FW)) lines.push(`-A ${FW} ${formatArgs(args)}`);
  lines.push(`-A ${IN} -j DROP`, `-A ${FW} -m conntrack --ctstate DNAT -j DROP`);
  for (const [builtin, own] of [
    ['INPUT', IN],
    ['FORWARD', FW],
  ] as const) {
    const present = filter?.rules.some((r) => r.chain === builtin && markOf(r.args) === DERIVED_MARK && r.args.includes(own));
    if (!present) lines.push(`-I ${builtin} 1 ${formatArgs(jumpArgs(own))}`);
  }
  // Declaring a user chain in a --noflush restore creates it, or flushes it when it exists.
  return { head: [`:${IN} - [0:0]`, `:${FW} - [0:0]`], lines };
}

export function unloadLines(filter: SavedTable | undefined): string[] {
  const lines: string[] = [];
  for (const r of filter?.rules ?? []) {
    if (markOf(r.args) === DERIVED_MARK && !r.chain.startsWith(DERIVED_PREFIX)) lines.push(`-D ${r.chain} ${formatArgs(r.args)}`);
  }
  for (const c of Object.values(DERIVED_CHAINS)) if (hasChain(filter, c)) lines.push(`-F ${c}`, `-X ${c}`);
  return lines;
}

export async function loadDerived(d: DriverParts, f: DerivedFilter): Promise<void> {
  const filters = await d.filters();
  const plans = FAMILIES.map((fam) => ({ fam, ...derivedLines(fam, filters[fam], f) }));
  const done: Family[] = [];
  for (const p of plans) {
    try {
      await d.tools[p.fam].restore(transaction(p.lines, 'filter', p.head));
    } catch (e) {
      // Undo the families already loaded when they had no derived filter before.
      for (const fam of done) {
        if (!hasChain(filters[fam], DERIVED_CHAINS.INPUT)) await d.tools[fam].restore(transaction(unloadLines(JUST_LOADED))).catch(() => undefined);
      }
      throw e;
    }
    done.push(p.fam);
  }
}

/** The derived filter as it stands in one family's filter table: its chains' rules and the jumps to them, as lines. */
export function derivedState(filter: SavedTable | undefined): string[] {
  const own = new Set<string>(Object.values(DERIVED_CHAINS));
  return (filter?.rules ?? []).filter((r) => own.has(r.chain) || markOf(r.args) === DERIVED_MARK).map((r) => `-A ${r.chain} ${formatArgs(r.args)}`);
}

export async function unloadDerived(d: DriverParts): Promise<void> {
  const filters = await d.filters();
  for (const fam of FAMILIES) {
    const lines = unloadLines(filters[fam]);
    if (lines.length) await d.tools[fam].restore(transaction(lines));
  }
}

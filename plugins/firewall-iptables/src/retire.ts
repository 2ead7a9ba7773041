/**
 * Retiring the found firewall without flushing: only its own rules go (never Docker's, never the
 * mesh's), builtin policies become ACCEPT, its config file is left alone. Re-enabling loads its
 * filter table back from that config file, re-placing the mesh's openings before its first drop.
 */
import { readFile } from 'node:fs/promises';
import { MeshpError, type RetiredState } from '@meshp/core';
import { isForeignChain } from './chains.js';
import type { Family } from './cidr.js';
import { configFile } from './config.js';
import { isDrop, markOf, parseMarked, targetOf } from './marks.js';
import { placementOf } from './placement.js';
import { runChecked, type CommandRunner } from './runner.js';
import { BUILTIN_CHAINS, findTable, formatArgs, optionValue, parseSave, ruleKey, transaction, type SavedRule, type SavedTable } from './save-format.js';
import { FAMILIES, type Backend, type IptablesTool } from './tool.js';

interface DriverParts {
  backend: Backend;
  kind: string;
  tools: Record<Family, IptablesTool>;
  options: { runner: CommandRunner; root: string };
  filters(): Promise<Record<Family, SavedTable | undefined>>;
}

export interface RetiredFamily {
  policies: Record<string, string>;
  rules: { chain: string; args: string[]; index: number }[];
  chains: { name: string; rules: string[][] }[];
}

const BUILTIN = BUILTIN_CHAINS.filter!;

/** Docker's rules in builtin chains: jumps to its chains, accepts on its bridges. */
function isDockers(r: SavedRule): boolean {
  const bridge = (opt: string) => {
    const v = optionValue(r.args, opt);
    return v !== undefined && (v === 'docker0' || v.startsWith('br-'));
  };
  return isForeignChain(targetOf(r.args) ?? '') || bridge('-i') || bridge('-o');
}

/** A rule the found firewall put there: unmarked, not Docker's, not in the mesh's derived chains. */
export function isFoundRule(r: SavedRule): boolean {
  return !markOf(r.args) && !isForeignChain(r.chain) && !isDockers(r);
}

/** The filter table a config file defines, as the tools print it: loaded into a scratch namespace and listed. */
export async function loadConfig(d: DriverParts, family: Family): Promise<SavedTable | null> {
  let text: string;
  try {
    text = await readFile(configFile(d.options.root, family), 'utf8');
  } catch {
    return null;
  }
  const tool = d.tools[family];
  const r = await runChecked(d.options.runner, 'unshare', ['--net', '--', 'sh', '-c', '"$0" && "$1"', tool.restoreCmd, tool.saveCmd], text).catch(
    (e: unknown) => {
      throw new MeshpError('MESHP_FIREWALL_FAILED', `the config ${configFile(d.options.root, family)} does not load`, { cause: e });
    },
  );
  return findTable(parseSave(r.stdout), 'filter') ?? null;
}

function retireFamily(live: SavedTable, config: SavedTable | null): { head: string[]; lines: string[]; record: RetiredFamily } {
  const fromConfig = new Map<string, number>();
  for (const r of config?.rules ?? []) fromConfig.set(ruleKey(r), (fromConfig.get(ruleKey(r)) ?? 0) + 1);
  const own = (r: SavedRule) => {
    if (!isFoundRule(r)) return false;
    if (!config) return true;
    const n = fromConfig.get(ruleKey(r)) ?? 0;
    if (n > 0) fromConfig.set(ruleKey(r), n - 1);
    return n > 0;
  };
  const ownChains = live.chains.filter((c) => c.policy === null && !isForeignChain(c.name) && (!config || config.chains.some((x) => x.name === c.name)));
  const docker = live.chains.some((c) => c.name.startsWith('DOCKER'));
  const record: RetiredFamily = { policies: {}, rules: [], chains: [] };
  const head: string[] = [];
  const lines: string[] = [];
  const pos = new Map<string, number>();
  for (const r of live.rules) {
    const index = (pos.get(r.chain) ?? 0) + 1;
    pos.set(r.chain, index);
    if (!BUILTIN.includes(r.chain) || !own(r)) continue;
    record.rules.push({ chain: r.chain, args: r.args, index });
    lines.push(`-D ${r.chain} ${formatArgs(r.args)}`);
  }
  for (const c of ownChains) {
    record.chains.push({ name: c.name, rules: live.rules.filter((r) => r.chain === c.name).map((r) => r.args) });
    lines.push(`-F ${c.name}`);
  }
  for (const c of ownChains) lines.push(`-X ${c.name}`);
  for (const c of live.chains) {
    if (!c.policy) continue;
    record.policies[c.name] = c.policy;
    // Docker sets FORWARD's DROP itself; opening it would expose its containers' networks.
    if (c.policy !== 'ACCEPT' && !(docker && c.name === 'FORWARD')) head.push(`:${c.name} ACCEPT [0:0]`);
  }
  return { head, lines, record };
}

export async function retire(d: DriverParts): Promise<RetiredState> {
  const filters = await d.filters();
  const plans = [];
  for (const f of FAMILIES) {
    const live = filters[f];
    if (!live) continue;
    plans.push({ f, ...retireFamily(live, await loadConfig(d, f)) });
  }
  const families: Record<string, RetiredFamily> = {};
  for (const p of plans) {
    if (p.head.length || p.lines.length) await d.tools[p.f].restore(transaction(p.lines, 'filter', p.head));
    families[String(p.f)] = p.record;
  }
  return { kind: d.kind, backend: d.backend, families, at: new Date().toISOString() };
}

function fromRecord(rec: RetiredFamily): SavedTable {
  const rules = [...rec.rules].sort((a, b) => a.index - b.index).map((r) => ({ chain: r.chain, args: r.args }));
  for (const c of rec.chains) for (const args of c.rules) rules.push({ chain: c.name, args });
  return {
    name: 'filter',
    chains: [...Object.entries(rec.policies).map(([name, policy]) => ({ name, policy })), ...rec.chains.map((c) => ({ name: c.name, policy: null }))],
    rules,
  };
}

function reenableFamily(family: Family, live: SavedTable | undefined, config: SavedTable): { head: string[]; lines: string[] } {
  const head: string[] = [];
  const lines: string[] = [];
  const userChains = config.chains.filter((c) => c.policy === null && !isForeignChain(c.name));
  for (const c of config.chains) if (c.policy && BUILTIN.includes(c.name)) head.push(`:${c.name} ${c.policy} [0:0]`);
  for (const c of userChains) head.push(`:${c.name} - [0:0]`);
  const found = config.rules.filter(isFoundRule);
  const touched = new Set(found.filter((r) => BUILTIN.includes(r.chain)).map((r) => r.chain));
  const liveKeys = new Set((live?.rules ?? []).filter((r) => !markOf(r.args)).map(ruleKey));
  const sim = new Map<string, SavedRule[]>();
  const ours: SavedRule[] = [];
  for (const r of live?.rules ?? []) {
    if (touched.has(r.chain) && markOf(r.args) && parseMarked(r)) {
      ours.push(r);
      lines.push(`-D ${r.chain} ${formatArgs(r.args)}`);
    } else if (BUILTIN.includes(r.chain) || r.chain.startsWith('DOCKER')) sim.set(r.chain, [...(sim.get(r.chain) ?? []), r]);
  }
  for (const r of found) {
    if (BUILTIN.includes(r.chain) && liveKeys.has(ruleKey(r))) continue;
    lines.push(`-A ${r.chain} ${formatArgs(r.args)}`);
    sim.set(r.chain, [...(sim.get(r.chain) ?? []), r]);
  }
  for (const r of ours) {
    const chain = sim.get(r.chain) ?? [];
    // An accept goes back where the placement rule puts it in the table as it will be (below every
    // partial denial such as a ban, above the total one), as ensure would place it; a refusal on top.
    const table: SavedTable = { name: 'filter', chains: config.chains, rules: [...sim.values()].flat() };
    const spec = parseMarked(r);
    const p = isDrop(r.args) || !spec ? null : placementOf(family, table, spec);
    const at = p === null ? 1 : p.kind === 'before' ? p.index + 1 : null;
    if (at === null) chain.push(r);
    else chain.splice(at - 1, 0, r);
    sim.set(r.chain, chain);
    lines.push(at === null ? `-A ${r.chain} ${formatArgs(r.args)}` : `-I ${r.chain} ${at} ${formatArgs(r.args)}`);
  }
  return { head, lines };
}

export async function reenable(d: DriverParts, state: RetiredState): Promise<void> {
  const recorded = (state.families ?? {}) as Record<string, RetiredFamily>;
  const filters = await d.filters();
  for (const f of FAMILIES) {
    const config = (await loadConfig(d, f)) ?? (recorded[String(f)] ? fromRecord(recorded[String(f)]!) : null);
    if (!config) continue;
    const { head, lines } = reenableFamily(f, filters[f], config);
    if (head.length || lines.length) await d.tools[f].restore(transaction(lines, 'filter', head));
  }
}

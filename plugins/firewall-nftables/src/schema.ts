/**
 * The part of the `nft -j` JSON schema (libnftables-json(5), schema version 1) this plugin reads
 * and writes. Expressions stay structural (`Expr`): the plugin recognises only the shapes it
 * writes itself and the verdicts of everyone else's rules.
 */
import { MeshpError } from '@meshp/core';
import type { Arrivals } from '@meshp/core/net';

export type Family = 'ip' | 'ip6' | 'inet' | 'arp' | 'bridge' | 'netdev';
export type Verdict = 'accept' | 'drop' | 'reject';

export interface NftTable {
  family: Family;
  name: string;
  handle?: number;
  flags?: string | string[];
}

export interface NftChain {
  family: Family;
  table: string;
  name: string;
  handle?: number;
  type?: string;
  hook?: string;
  prio?: number;
  policy?: 'accept' | 'drop';
  dev?: string;
}

/** One statement of a rule, e.g. `{ match: {...} }`, `{ accept: null }`, `{ xt: {...} }`. */
export type Expr = Record<string, unknown>;

export interface NftRule {
  family: Family;
  table: string;
  chain: string;
  handle?: number;
  comment?: string;
  expr: Expr[];
}

/** One element of the top-level `nftables` array, keyed by object kind. */
export type NftObject = Record<string, object>;

export interface Ruleset {
  tables: NftTable[];
  chains: NftChain[];
  rules: NftRule[];
  /** Every object as listed (sets, maps, elements, … included), metainfo excluded. */
  objects: NftObject[];
  /** The sources arriving on each interface, by the routes read beside the listing (routes.ts): how `iifname` is read. */
  arrivals?: Arrivals;
}

export type Command = { add: NftObject } | { insert: { rule: NftRule } } | { delete: NftObject } | { flush: NftObject };

export interface Batch {
  nftables: Command[];
}

const FAMILIES = new Set<string>(['ip', 'ip6', 'inet', 'arp', 'bridge', 'netdev']);

function bad(message: string): never {
  throw new MeshpError('MESHP_FIREWALL_OUTPUT', `nft -j list ruleset: ${message}`);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function str(o: Record<string, unknown>, key: string, what: string): string {
  const v = o[key];
  if (typeof v !== 'string') bad(`${what} without a string ${key}`);
  return v;
}

function family(o: Record<string, unknown>, what: string): Family {
  const f = str(o, 'family', what);
  if (!FAMILIES.has(f)) bad(`${what} of unknown family ${f}`);
  return f as Family;
}

function handle(o: Record<string, unknown>): number | undefined {
  return typeof o.handle === 'number' ? o.handle : undefined;
}

/** Reads `nft -j list ruleset` output; anything not shaped like it is MESHP_FIREWALL_OUTPUT. */
export function parseRuleset(text: string): Ruleset {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch (e) {
    throw new MeshpError('MESHP_FIREWALL_OUTPUT', 'nft -j list ruleset: output is not JSON', { cause: e });
  }
  if (!isObject(doc) || !Array.isArray(doc.nftables)) bad('no "nftables" array');
  const out: Ruleset = { tables: [], chains: [], rules: [], objects: [] };
  for (const item of doc.nftables as unknown[]) {
    if (!isObject(item)) bad('an entry is not an object');
    const keys = Object.keys(item);
    if (keys.length !== 1) bad('an entry has not exactly one kind');
    const kind = keys[0]!;
    const body = item[kind];
    if (kind === 'metainfo') continue;
    if (!isObject(body)) bad(`a ${kind} entry is not an object`);
    out.objects.push({ [kind]: body });
    if (kind === 'table') {
      out.tables.push({ family: family(body, 'table'), name: str(body, 'name', 'table'), handle: handle(body), flags: body.flags as NftTable['flags'] });
    } else if (kind === 'chain') {
      const c: NftChain = { family: family(body, 'chain'), table: str(body, 'table', 'chain'), name: str(body, 'name', 'chain'), handle: handle(body) };
      if (typeof body.type === 'string') c.type = body.type;
      if (typeof body.hook === 'string') c.hook = body.hook;
      if (typeof body.prio === 'number') c.prio = body.prio;
      if (body.policy === 'accept' || body.policy === 'drop') c.policy = body.policy;
      out.chains.push(c);
    } else if (kind === 'rule') {
      if (!Array.isArray(body.expr) || !body.expr.every(isObject)) bad('a rule without an expr list');
      const r: NftRule = {
        family: family(body, 'rule'),
        table: str(body, 'table', 'rule'),
        chain: str(body, 'chain', 'rule'),
        handle: handle(body),
        expr: body.expr as Expr[],
      };
      if (typeof body.comment === 'string') r.comment = body.comment;
      out.rules.push(r);
    }
  }
  return out;
}

/** The verdict a rule ends in, if it is one this plugin cares about. */
export function verdictOf(rule: NftRule): Verdict | null {
  for (const e of rule.expr) {
    if ('drop' in e) return 'drop';
    if ('reject' in e) return 'reject';
    if ('accept' in e) return 'accept';
  }
  return null;
}

/** "inet filter" for a table, and for the chain or rule it holds. */
export function tableKey(t: { family: string; name?: string; table?: string }): string {
  return `${t.family} ${t.table ?? t.name}`;
}

export function chainKey(c: { family: string; table: string; name?: string; chain?: string }): string {
  return `${c.family} ${c.table} ${c.name ?? c.chain}`;
}

/**
 * The text format of iptables-save / iptables-restore: tables, chains with their policies,
 * and rules as argument lists. Parsing is strict: anything unexpected is MESHP_FIREWALL_OUTPUT.
 */
import { MeshpError } from '@meshp/core';
import type { Arrivals, Span } from '@meshp/core/net';

export interface SavedChain {
  name: string;
  /** ACCEPT / DROP for builtin chains; null for user chains ("-"). */
  policy: string | null;
}

export interface SavedRule {
  chain: string;
  /** Arguments after `-A CHAIN`, unquoted. */
  args: string[];
}

export interface SavedTable {
  name: string;
  chains: SavedChain[];
  rules: SavedRule[];
  /**
   * The sources arriving on each interface, by the node's routes read beside the table (the
   * driver's filters(), routes.ts): how `-i` matches are read. Absent: `-i` is unread.
   */
  arrivals?: Arrivals;
  /**
   * The members of the ipsets of one address dimension (`hash:ip`, `hash:net`, `bitmap:ip`), by
   * name, as `ipset save` lists them beside the table (ipsets.ts): how `-m set --match-set NAME src`
   * is read. A set absent here (another type, not listed) is unread.
   */
  ipsets?: ReadonlyMap<string, readonly Span[]>;
}

export interface Ruleset {
  tables: SavedTable[];
}

export const BUILTIN_CHAINS: Record<string, readonly string[]> = {
  filter: ['INPUT', 'FORWARD', 'OUTPUT'],
  nat: ['PREROUTING', 'INPUT', 'OUTPUT', 'POSTROUTING'],
  mangle: ['PREROUTING', 'INPUT', 'FORWARD', 'OUTPUT', 'POSTROUTING'],
  raw: ['PREROUTING', 'OUTPUT'],
  security: ['INPUT', 'FORWARD', 'OUTPUT'],
};

function bad(message: string, line: number, text: string): MeshpError {
  return new MeshpError('MESHP_FIREWALL_OUTPUT', `iptables-save output line ${line}: ${message}: ${text.slice(0, 120)}`);
}

/** Splits a rule line the way iptables-restore does: whitespace, double quotes, backslash escapes inside quotes. */
export function tokenize(line: string): string[] {
  const out: string[] = [];
  let cur = '';
  let quoted = false;
  let has = false;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quoted) {
      if (c === '\\' && (line[i + 1] === '"' || line[i + 1] === '\\')) cur += line[++i];
      else if (c === '"') quoted = false;
      else cur += c;
    } else if (c === '"') {
      quoted = true;
      has = true;
    } else if (c === ' ' || c === '\t') {
      if (has) out.push(cur);
      cur = '';
      has = false;
    } else {
      cur += c;
      has = true;
    }
  }
  if (quoted) throw new Error('unterminated quote');
  if (has) out.push(cur);
  return out;
}

export function quote(arg: string): string {
  if (arg !== '' && /^[^\s"\\']+$/.test(arg)) return arg;
  return `"${arg.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

export function formatArgs(args: readonly string[]): string {
  return args.map(quote).join(' ');
}

export function parseSave(text: string): Ruleset {
  const tables: SavedTable[] = [];
  let table: SavedTable | null = null;
  const lines = text.split('\n');
  for (let n = 0; n < lines.length; n++) {
    const line = lines[n]!.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('*')) {
      if (table) throw bad('table opened before COMMIT', n + 1, line);
      const name = line.slice(1);
      if (!/^[a-z]+$/.test(name)) throw bad('bad table name', n + 1, line);
      table = { name, chains: [], rules: [] };
    } else if (line === 'COMMIT') {
      if (!table) throw bad('COMMIT outside a table', n + 1, line);
      tables.push(table);
      table = null;
    } else if (line.startsWith(':')) {
      if (!table) throw bad('chain outside a table', n + 1, line);
      const m = /^:(\S+)\s+(\S+)(\s+\[\d+:\d+\])?$/.exec(line);
      if (!m) throw bad('bad chain line', n + 1, line);
      table.chains.push({ name: m[1]!, policy: m[2] === '-' ? null : m[2]! });
    } else if (line.startsWith('-A ')) {
      if (!table) throw bad('rule outside a table', n + 1, line);
      let words: string[];
      try {
        words = tokenize(line);
      } catch (e) {
        throw bad(String((e as Error).message), n + 1, line);
      }
      const chain = words[1];
      if (!chain || !table.chains.some((c) => c.name === chain)) throw bad('rule in an undeclared chain', n + 1, line);
      table.rules.push({ chain, args: words.slice(2) });
    } else if (/^\[\d+:\d+\] -A /.test(line)) {
      throw bad('counters are not expected (save without -c)', n + 1, line);
    } else {
      throw bad('unexpected line', n + 1, line);
    }
  }
  if (table) throw new MeshpError('MESHP_FIREWALL_OUTPUT', `iptables-save output ends inside table ${table.name} (no COMMIT)`);
  return { tables };
}

export function serializeTable(table: SavedTable): string {
  const lines = [`*${table.name}`];
  for (const c of table.chains) lines.push(`:${c.name} ${c.policy ?? '-'} [0:0]`);
  for (const r of table.rules) lines.push(`-A ${r.chain} ${formatArgs(r.args)}`);
  lines.push('COMMIT', '');
  return lines.join('\n');
}

export function findTable(rs: Ruleset, name: string): SavedTable | undefined {
  return rs.tables.find((t) => t.name === name);
}

export function chainRules(table: SavedTable | undefined, chain: string): SavedRule[] {
  return table ? table.rules.filter((r) => r.chain === chain) : [];
}

/** The value after an option, e.g. `-j` → "DROP". Honors nothing fancy: first occurrence. */
export function optionValue(args: readonly string[], option: string): string | undefined {
  const i = args.indexOf(option);
  return i >= 0 ? args[i + 1] : undefined;
}

export function ruleKey(r: SavedRule): string {
  return `${r.chain}\u0000${r.args.join('\u0000')}`;
}

/** An iptables-restore input: one table's lines (after the chain declarations in `head`), committed at once. */
export function transaction(lines: readonly string[], table = 'filter', head: readonly string[] = []): string {
  return [`*${table}`, ...head, ...lines, 'COMMIT', ''].join('\n');
}

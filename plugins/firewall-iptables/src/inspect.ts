/**
 * What one backend holds, read without creating anything: iptables-save with no table named,
 * which lists only the tables that exist (for legacy, those in /proc/net/ip{,6}_tables_names,
 * read inside the namespace) — one process a family.
 */
import { DOCKER_USER, hasChain, isForeignChain } from './chains.js';
import type { Family } from './cidr.js';
import { isDrop, markOf } from './marks.js';
import type { CommandRunner } from './runner.js';
import { findTable, parseSave, type Ruleset, type SavedTable } from './save-format.js';
import { familyName, FAMILIES, IptablesTool, type Backend } from './tool.js';

export interface FamilyState {
  family: Family;
  ruleset: Ruleset;
}

export interface BackendState {
  backend: Backend;
  families: FamilyState[];
  /** Any table present in this backend. */
  present: boolean;
  /** A builtin chain with policy DROP, or a DROP/REJECT rule that is not Docker's or the mesh's. */
  active: boolean;
  /** ufw's chains are here: the rules are ufw's. */
  ufw: boolean;
  docker: boolean;
  summary: string;
}

const PROC: Record<Family, string> = { 4: '/proc/net/ip_tables_names', 6: '/proc/net/ip6_tables_names' };

/** Legacy table names as the kernel lists them; an absent file means the module is not loaded: no tables. */
export async function legacyTableNames(runner: CommandRunner, family: Family): Promise<string[]> {
  const r = await runner('cat', [PROC[family]]);
  if (r.code !== 0) return [];
  return r.stdout
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
}

export function filterActive(filter: SavedTable | undefined): boolean {
  if (!filter) return false;
  const docker = filter.chains.some((c) => c.name.startsWith('DOCKER'));
  for (const c of filter.chains) {
    // Docker sets FORWARD's policy to DROP itself: that alone is not a found firewall.
    if (c.policy === 'DROP' && !(docker && c.name === 'FORWARD')) return true;
  }
  return filter.rules.some((r) => !isForeignChain(r.chain) && !markOf(r.args) && isDrop(r.args));
}

function describeFamily(f: FamilyState): string {
  const filter = findTable(f.ruleset, 'filter');
  const names = f.ruleset.tables.map((t) => t.name).join(',');
  if (!filter) return `${familyName(f.family)}: tables ${names || 'none'}`;
  const pol = filter.chains
    .filter((c) => c.policy)
    .map((c) => `${c.name} ${c.policy}`)
    .join(', ');
  const marked = filter.rules.filter((r) => markOf(r.args)).length;
  return `${familyName(f.family)}: tables ${names}; filter ${pol}; ${filter.rules.length} rules (${marked} meshp)`;
}

/** Each family's save, as text ('' for a legacy family with no tables), read side by side: one process a family. */
export async function readSaves(backend: Backend, runner: CommandRunner): Promise<Record<Family, string>> {
  const [v4, v6] = await Promise.all(
    FAMILIES.map(async (family) => {
      const tool = new IptablesTool(backend, family, runner);
      if (backend !== 'legacy') return tool.saveText();
      // iptables-legacy-save with no table named lists the tables in /proc/net/ip{,6}_tables_names
      // and creates none (only `-t` or `iptables -S` would): one process. Should it fail (the
      // module not loaded: no such file), the kernel's list says whether there was anything to read.
      try {
        return await tool.saveText();
      } catch (e) {
        if ((await legacyTableNames(runner, family)).length === 0) return '';
        throw e;
      }
    }),
  );
  return { 4: v4!, 6: v6! };
}

/** The saves' text as far as a plan reads it: iptables-save's dated comments and the chains' packet counters left out. */
export function savesKey(saves: Record<Family, string>): string {
  return FAMILIES.map((f) => saves[f].replace(/^#.*\n/gm, '').replace(/^(:\S+ \S+) \[\d+:\d+\]$/gm, '$1')).join('\0');
}

export async function inspectBackend(backend: Backend, runner: CommandRunner, read?: Record<Family, string>): Promise<BackendState> {
  const saves = read ?? (await readSaves(backend, runner));
  const families: FamilyState[] = FAMILIES.map((family) => ({ family, ruleset: parseSave(saves[family]) }));
  const filters = families.map((f) => findTable(f.ruleset, 'filter'));
  const present = families.some((f) => f.ruleset.tables.length > 0);
  const active = filters.some(filterActive);
  const ufw = filters.some((t) => !!t?.chains.some((c) => /^ufw6?-/.test(c.name)));
  const docker = filters.some((t) => hasChain(t, DOCKER_USER));
  const summary = present ? families.map(describeFamily).join('; ') : 'no tables';
  return { backend, families, present, active, ufw, docker, summary };
}

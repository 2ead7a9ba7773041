/**
 * The found firewall's config file, learnt without applying it here: loaded into a throwaway
 * network namespace (`unshare --net`, gone when the command ends) and listed as JSON. Its tables
 * are then re-created here one by one, so a `flush ruleset` at its top never reaches Docker's
 * tables or the mesh's.
 */
import { resolveIncludes } from './include.js';
import { runTool } from './nft.js';
import type { Runner } from './runner.js';
import { parseRuleset, tableKey, type Command, type NftObject, type NftTable, type Ruleset } from './schema.js';

/** Loads `file` (its includes resolved under `root`) in a scratch namespace and lists it. */
export async function loadInScratch(runner: Runner, bin: string, file: string, root = '/'): Promise<Ruleset> {
  const resolved = await resolveIncludes(root, file);
  try {
    const script = `"$0" -f "$1" && "$0" -j list ruleset`;
    const { stdout } = await runTool(runner, ['unshare', '--net', '--', 'sh', '-c', script, bin, resolved.file], `loading ${file} in a scratch namespace`);
    return parseRuleset(stdout);
  } finally {
    await resolved.cleanup();
  }
}

function strip(body: Record<string, unknown>): Record<string, unknown> {
  const { handle: _h, ...rest } = body;
  return rest;
}

export function ownerOf(kind: string, body: Record<string, unknown>): string {
  return tableKey({ family: String(body.family), name: String(kind === 'table' ? body.name : body.table) });
}

/**
 * One atomic batch that replaces each of `tables` with its definition in `config`
 * (add-then-delete makes the delete safe when the table is absent).
 */
export function recreateTables(config: Ruleset, tables: readonly NftTable[]): Command[] {
  const commands: Command[] = [];
  const rank = (kind: string) => (kind === 'table' ? 0 : kind === 'chain' ? 2 : kind === 'rule' ? 3 : 1);
  for (const t of tables) {
    const id = { family: t.family, name: t.name };
    commands.push({ add: { table: { ...id } } }, { delete: { table: { ...id } } });
    const objects = config.objects
      .map((o): [string, Record<string, unknown>] => {
        const kind = Object.keys(o)[0]!;
        return [kind, o[kind] as Record<string, unknown>];
      })
      .filter(([kind, body]) => ownerOf(kind, body) === tableKey(t))
      .sort((a, b) => rank(a[0]) - rank(b[0]));
    for (const [kind, body] of objects) commands.push({ add: { [kind]: strip(body) } as NftObject });
  }
  return commands;
}

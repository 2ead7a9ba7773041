/**
 * An exit node's default routes on the client (issue 26, ADR 0039): policy routing as wg-quick and
 * Tailscale do it, so that the tunnel's own UDP, the controller's connection and the underlay never
 * loop into the tunnel:
 *
 * - the WireGuard device marks its own packets (`wg set IF fwmark M`): they skip the exit's table;
 * - the default routes go into a table of the mesh's own (T), `default dev IF proto 61`, never into main;
 * - `ip rule pref P+1 lookup main suppress_prefixlength 0`: every route of main but its default wins
 *   first — the mesh's private range, the LANs of route groups, the underlay's connected subnets;
 * - `ip rule pref P+2 not fwmark M lookup T`: everything else goes into the tunnel;
 * - `ip rule pref P to C lookup main` for each controller address, ahead of both: the agent's own
 *   connection keeps main's route to it (its default gateway too), whatever the exit node does.
 *
 * Everything added is recorded in the state folder before it is added (`<if>.exit.json`: the table,
 * the rules by their full spec, the device's fwmark before), and taken away exactly from that record
 * when the node stops using the exit node, the group goes, or the node leaves (a fresh process too):
 * a rule or route of anyone else is never touched, and main is never modified.
 */
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { join } from 'node:path';
import { run } from './exec.js';
import { ROUTE_PROTO } from './routes.js';

/** The mesh's own routing table for the default routes, and the device's fwmark (one number, as wg-quick does). */
export const EXIT_TABLE = 6161;
/** The rules' priorities: P (the controller), P+1 (main without its default), P+2 (the rest into T). */
export const EXIT_RULE_PREF = 6160;

export type Family = '-4' | '-6';

export interface ExitRecord {
  interface: string;
  table: number;
  fwmark: number;
  /** The device's fwmark before the mesh set it (0: none). */
  fwmarkBefore: number;
  /** Each rule added, by family and its full `ip rule add` arguments (the same ones delete it). */
  rules: { family: Family; args: string[] }[];
  families: Family[];
}

export const exitRecordFile = (stateDir: string, ifname: string): string => join(stateDir, `${ifname}.exit.json`);

export function readExitRecord(stateDir: string, ifname: string): ExitRecord | null {
  const file = exitRecordFile(stateDir, ifname);
  if (!existsSync(file)) return null;
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as ExitRecord;
  } catch {
    return null;
  }
}

/** The default routes' families an exit group's prefixes ask for. */
export const familiesOf = (prefixes: Iterable<string>): Family[] =>
  [...new Set([...prefixes].filter((p) => p.endsWith('/0')).map((p): Family => (p.includes(':') ? '-6' : '-4')))].sort();

/** The controller's hosts as addresses (names resolved), loopback left out: the rule keeps them in main. */
export async function bypassAddresses(hosts: readonly string[]): Promise<string[]> {
  const out = new Set<string>();
  for (const h of hosts) {
    const found = isIP(h) ? [{ address: h }] : await lookup(h, { all: true }).catch(() => []);
    for (const { address } of found) if (!/^127\.|^::1$/.test(address)) out.add(address);
  }
  return [...out].sort();
}

async function deviceFwmark(ifname: string): Promise<number> {
  const text = (await run('wg', ['show', ifname, 'fwmark']).catch(() => 'off')).trim();
  return text === 'off' || text === '' ? 0 : Number(text);
}

const ruleCount = async (family: Family, pref: string): Promise<number> =>
  (JSON.parse((await run('ip', ['-j', family, 'rule', 'show', 'pref', pref]).catch(() => '[]')) || '[]') as unknown[]).length;

/** The rules for one family, in the order they are added. */
function rulesFor(family: Family, table: number, bypass: readonly string[]): { family: Family; args: string[] }[] {
  const mine = bypass.filter((a) => (family === '-6') === a.includes(':'));
  return [
    ...mine.map((a) => ({ family, args: ['pref', String(EXIT_RULE_PREF), 'to', a, 'lookup', 'main'] })),
    { family, args: ['pref', String(EXIT_RULE_PREF + 1), 'lookup', 'main', 'suppress_prefixlength', '0'] },
    { family, args: ['pref', String(EXIT_RULE_PREF + 2), 'not', 'fwmark', String(table), 'lookup', String(table)] },
  ];
}

/**
 * Makes the machine send its default routes into the tunnel (`families` non-empty) or not (empty),
 * from the record kept in `stateDir`: what is wanted and recorded already is checked, not added twice.
 */
export async function setExitRoutes(o: {
  ifname: string;
  stateDir: string;
  families: readonly Family[];
  bypass: readonly string[];
}): Promise<ExitRecord | null> {
  const had = readExitRecord(o.stateDir, o.ifname);
  const table = EXIT_TABLE;
  const wanted = o.families.flatMap((f) => rulesFor(f, table, o.bypass));
  const same = had && JSON.stringify(had.rules) === JSON.stringify(wanted);
  if (had && !same) await removeExitRoutes(o.stateDir, o.ifname);
  if (!o.families.length) return null;
  const record: ExitRecord = same
    ? had
    : { interface: o.ifname, table, fwmark: table, fwmarkBefore: await deviceFwmark(o.ifname), rules: wanted, families: [...o.families] };
  // Recorded before anything is added: a crash midway leaves a record of all it may have added.
  if (!same) writeFileSync(exitRecordFile(o.stateDir, o.ifname), JSON.stringify(record, null, 2) + '\n', { mode: 0o600 });
  if ((await deviceFwmark(o.ifname)) !== record.fwmark) await run('wg', ['set', o.ifname, 'fwmark', String(record.fwmark)]);
  for (const f of record.families) await run('ip', [f, 'route', 'replace', 'default', 'dev', o.ifname, 'table', String(table), 'proto', ROUTE_PROTO]);
  // After a restart the recorded rules stand already: those of a priority all there are kept, the others made again.
  for (const r of record.rules) {
    const pref = r.args[1]!;
    const ofPref = record.rules.filter((x) => x.family === r.family && x.args[1] === pref).length;
    if (same && (await ruleCount(r.family, pref)) === ofPref) continue;
    await run('ip', [r.family, 'rule', 'del', ...r.args]).catch(() => undefined);
    await run('ip', [r.family, 'rule', 'add', ...r.args]);
  }
  return record;
}

/**
 * Takes away exactly what the record says was added — its rules, the table's routes of the mesh's
 * protocol, the device's fwmark back to what it was — then the record. Answers what it took away
 * (for the leave's account), [] with no record.
 */
export async function removeExitRoutes(stateDir: string, ifname: string, preview = false): Promise<string[]> {
  const r = readExitRecord(stateDir, ifname);
  if (!r) return [];
  const said = [`the exit node's routing of ${ifname}: ${r.rules.length} ip rule(s) (pref ${EXIT_RULE_PREF}-${EXIT_RULE_PREF + 2}) and table ${r.table}`];
  if (preview) return said;
  for (const x of r.rules) await run('ip', [x.family, 'rule', 'del', ...x.args]).catch(() => undefined);
  for (const f of r.families) await run('ip', [f, 'route', 'flush', 'table', String(r.table), 'proto', ROUTE_PROTO]).catch(() => undefined);
  if ((await deviceFwmark(ifname).catch(() => 0)) === r.fwmark) await run('wg', ['set', ifname, 'fwmark', String(r.fwmarkBefore)]).catch(() => undefined);
  rmSync(exitRecordFile(stateDir, ifname), { force: true });
  return said;
}

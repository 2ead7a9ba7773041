/**
 * Firewall managers this plugin does not speak (firewalld, ufw, Shorewall, csf, Proxmox VE's pve-firewall): their rules are theirs, and a rule written beside
 * them is lost at their next reload or lands where their chains never pass it. Each is recognised
 * by its footprint in the filter table (its chains) or by its enabled config under the root; a
 * manager seen means no driver is offered, and the host refuses with MESHP_FIREWALL_UNKNOWN.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { managersSeen, type ManagerSeen } from '@meshp/core/lifecycle';
import type { CommandRunner } from './runner.js';
import type { SavedTable } from './save-format.js';

export type { ManagerSeen };

/** Chains only each manager makes. */
const FOOTPRINTS: { kind: string; test: (names: ReadonlySet<string>) => string | null }[] = [
  {
    kind: 'firewalld',
    test: (n) => ['INPUT_ZONES', 'FORWARD_IN_ZONES', 'INPUT_direct', 'FORWARD_direct', 'INPUT_dispatch', 'FORWARD_dispatch'].find((c) => n.has(c)) ?? null,
  },
  { kind: 'ufw', test: (n) => [...n].find((c) => /^ufw6?-/.test(c)) ?? null },
  {
    kind: 'shorewall',
    // Shorewall marks its ruleset with an empty `shorewall` chain; its zone chains are net-fw / net2fw.
    test: (n) => (n.has('shorewall') ? 'shorewall' : n.has('dynamic') && (n.has('net-fw') || n.has('net2fw')) ? 'dynamic, net-fw' : null),
  },
  { kind: 'csf', test: (n) => (n.has('LOCALINPUT') && (n.has('ALLOWIN') || n.has('DENYIN') || n.has('LOGDROPIN')) ? 'LOCALINPUT, ALLOWIN/DENYIN' : null) },
  // Proxmox VE's pve-firewall names every chain it makes PVEFW-… (PVEFW-INPUT, PVEFW-HOST-IN, PVEFW-Drop …).
  { kind: 'pve-firewall', test: (n) => [...n].find((c) => c.startsWith('PVEFW-')) ?? null },
];

/** Managers whose chains are in these filter tables. */
export function managersInRules(filters: readonly (SavedTable | undefined)[]): ManagerSeen[] {
  const names = new Set(filters.flatMap((f) => f?.chains.map((c) => c.name) ?? []));
  return FOOTPRINTS.flatMap((f) => {
    const hit = f.test(names);
    return hit ? [{ kind: f.kind, seen: `chain ${hit}` }] : [];
  });
}

/**
 * Managers enabled by their config under the root, or running (the process table under the root):
 * core's one list, read from this root. A daemon counts only in the network namespace the
 * runner's commands run in (its `/proc/self/ns/net`); when that cannot be read, every one counts.
 */
export async function managersInConfig(root: string, runner?: CommandRunner): Promise<ManagerSeen[]> {
  const own = runner ? await runner('readlink', ['/proc/self/ns/net']).catch(() => null) : null;
  const net =
    own && own.code === 0 && own.stdout.trim()
      ? { own: own.stdout.trim(), of: (pid: number) => readlink(join(root, 'proc', String(pid), 'ns/net')).catch(() => null) }
      : undefined;
  return managersSeen(
    (path) => readFile(join(root, path), 'utf8').catch(() => null),
    (path) => readdir(join(root, path)).catch(() => []),
    net,
  );
}

/** Both, one sighting per kind. */
export function mergeManagers(...lists: ManagerSeen[][]): ManagerSeen[] {
  const by = new Map<string, string[]>();
  for (const m of lists.flat()) by.set(m.kind, [...(by.get(m.kind) ?? []), m.seen]);
  return [...by].map(([kind, seen]) => ({ kind, seen: seen.join('; ') }));
}

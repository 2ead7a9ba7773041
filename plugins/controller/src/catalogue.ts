/**
 * A network's catalogue read back (issue 33): what each module declares, counted, and which nodes
 * hold it, from the controller's own records. The definition itself is given as stored, as JSON:
 * a module defined at genesis keeps its placeholders ("{{ports.tunnel}}"), which the wire's
 * ModuleDecl (ports as numbers) cannot carry.
 */
import { settingsNamed } from '@meshp/core/catalogue';
import type { MemberRecord, ModuleDef } from '@meshp/core/delta';

export interface CatalogueModuleInfo {
  name: string;
  files: number;
  containers: number;
  openings: number;
  /** The nodes it is assigned to, and those that took it, by name. */
  assignedTo: string[];
  takenBy: string[];
  /** The node settings it names (`ports.NAME`, `privateRange`). */
  settings: string[];
}

/** Every module of the catalogue with its nodes: the members are read once, not once a module. */
export function catalogueInfo(defs: ModuleDef[], members: MemberRecord[]): CatalogueModuleInfo[] {
  const by = new Map<string, { assigned: string[]; taken: string[] }>(defs.map((d) => [d.name, { assigned: [], taken: [] }]));
  for (const m of members) {
    for (const a of m.assigned) by.get(a)?.assigned.push(m.id);
    for (const x of m.taken) by.get(x)?.taken.push(m.id);
  }
  return defs.map((d) => ({
    name: d.name,
    files: d.files?.length ?? 0,
    containers: d.containers?.length ?? 0,
    openings: d.openings?.length ?? 0,
    assignedTo: by.get(d.name)!.assigned.sort(),
    takenBy: by.get(d.name)!.taken.sort(),
    settings: settingsNamed(d),
  }));
}

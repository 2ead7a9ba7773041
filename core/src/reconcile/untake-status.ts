/**
 * Whether each module's take can be undone, as far as the host's records alone tell (issue 29): what
 * `meshp host status` shows without asking the machine. What only the machine can say (an image or a
 * volume gone, a file changed since the take) is checked by the untake's preview.
 */
import type { Records } from './rule.js';

export interface UntakeStatus {
  module: string;
  /** Resources the take changed that untake puts back from a recorded original. */
  putBack: string[];
  /** Why untake is refused whatever the machine holds: resources with no original that the host did not make. */
  blockedBy: string[];
  /** An untake of this module was interrupted: run it again. */
  interrupted?: string;
}

export function untakeStatus(records: Records, running: { module: string; at?: string } | null): UntakeStatus[] {
  const byModule = new Map<string, UntakeStatus>();
  const of = (module: string) => byModule.get(module) ?? byModule.set(module, { module, putBack: [], blockedBy: [] }).get(module)!;
  for (const owned of records.owned.values()) {
    if (owned.kind === 'opening') continue;
    if (records.originals.has(owned.key)) of(owned.module).putBack.push(owned.key);
    else if (owned.made !== true) of(owned.module).blockedBy.push(`${owned.key}: MESHP_UNTAKE_NO_ORIGINAL (no original recorded, and not made by the mesh)`);
  }
  if (running) of(running.module).interrupted = `an untake of ${running.module} was interrupted${running.at ? ` (${running.at})` : ''}: run it again`;
  return [...byModule.values()].filter((s) => s.putBack.length + s.blockedBy.length > 0 || s.interrupted).sort((a, b) => (a.module < b.module ? -1 : 1));
}

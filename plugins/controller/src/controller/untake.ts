/**
 * A module's untake asked through the controller (issue 29, docs/adr/0027): recorded in the member as the
 * preview id the operator saw, the module no longer taken. Its declaration then says so (components.ts:
 * `untakes`), and the agent untakes it on the machine only if that preview is still the machine's.
 */
import { usage } from '@meshp/core/util';
import { updateMember } from './members.js';
import { withoutUntake } from './module-marks.js';
import type { ControllerState } from './state.js';

export function recordUntake(s: ControllerState, network: string, id: string, module: string, previewId: string): number {
  const m = s.member(s.net(network), id);
  if (!m.assigned.includes(module)) throw usage(`module ${module} is not assigned to ${id}`);
  const untaking = { ...(m.untaking ?? {}), [module]: previewId };
  return updateMember(s, network, id, { taken: m.taken.filter((x) => x !== module), untaking });
}

/** A module released (unassigned); with `previewId`, its held files that changed while held are put back by the agent to that preview. */
export function recordRelease(s: ControllerState, network: string, id: string, module: string, previewId: string | null): number {
  const m = s.member(s.net(network), id);
  if (!m.assigned.includes(module)) throw usage(`module ${module} is not assigned to ${id}`);
  const releasing = previewId ? { releasing: { ...(m.releasing ?? {}), [module]: previewId } } : {};
  return updateMember(s, network, id, { assigned: m.assigned.filter((x) => x !== module), ...withoutUntake(m.untaking, module), ...releasing });
}

/**
 * A module's untake asked through the controller (issue 29, docs/adr/0027): recorded in the member as the
 * preview id the operator saw, the module no longer taken. Its declaration then says so (components.ts:
 * `untakes`), and the agent untakes it on the machine only if that preview is still the machine's.
 */
import { usage } from '@meshp/core/util';
import { updateMember } from './members.js';
import type { ControllerState } from './state.js';

export function recordUntake(s: ControllerState, network: string, id: string, module: string, previewId: string): number {
  const m = s.member(s.net(network), id);
  if (!m.assigned.includes(module)) throw usage(`module ${module} is not assigned to ${id}`);
  const untaking = { ...(m.untaking ?? {}), [module]: previewId };
  return updateMember(s, network, id, { taken: m.taken.filter((x) => x !== module), untaking });
}

/** The member's untakes less `module`'s: a take again, or an unassignment, ends the untake asked. */
export function withoutUntake(untaking: Record<string, string> | undefined, module: string): { untaking?: Record<string, string> } {
  if (!untaking || !(module in untaking)) return {};
  const { [module]: _gone, ...rest } = untaking;
  return { untaking: rest };
}

/** A module released (unassigned); with `previewId`, its held files that changed while held are put back by the agent to that preview. */
export function recordRelease(s: ControllerState, network: string, id: string, module: string, previewId: string | null): number {
  const m = s.member(s.net(network), id);
  if (!m.assigned.includes(module)) throw usage(`module ${module} is not assigned to ${id}`);
  const releasing = previewId ? { releasing: { ...(m.releasing ?? {}), [module]: previewId } } : {};
  return updateMember(s, network, id, { assigned: m.assigned.filter((x) => x !== module), ...withoutUntake(m.untaking, module), ...releasing });
}

/** The member's releases less `module`'s: assigned again, the release asked is over. */
export function withoutRelease(releasing: Record<string, string> | undefined, module: string): { releasing?: Record<string, string> } {
  if (!releasing || !(module in releasing)) return {};
  const { [module]: _gone, ...rest } = releasing;
  return { releasing: rest };
}

/**
 * A member's marks per module (issue 29): the untakes and the releases asked, each a preview id by
 * module name. A take again or an unassignment ends the untake asked; an assignment again ends the release.
 */
type Marks = Record<string, string> | undefined;

function without(marks: Marks, module: string): Record<string, string> | null {
  if (!marks || !(module in marks)) return null;
  const { [module]: _gone, ...rest } = marks;
  return rest;
}

/** The member's untakes less `module`'s ({}: nothing to change). */
export function withoutUntake(untaking: Marks, module: string): { untaking?: Record<string, string> } {
  const rest = without(untaking, module);
  return rest ? { untaking: rest } : {};
}

/** The member's releases less `module`'s ({}: nothing to change). */
export function withoutRelease(releasing: Marks, module: string): { releasing?: Record<string, string> } {
  const rest = without(releasing, module);
  return rest ? { releasing: rest } : {};
}

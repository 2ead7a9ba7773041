/**
 * `release --restore` (issue 29, docs/adr/0027): an assigned module that is not taken holds its found
 * files as they are, and releasing it leaves them where they are (a held file is never modified or
 * removed). With --restore, a held file that changed while held — by the predecessor, the thing to undo —
 * gets its recorded original back (bytes, mode, owner); one unchanged since it was found is left as it is.
 * Previewed with an id over the plan and what was seen, as untake; what cannot be read blocks it, and a
 * plan with a block changes nothing. Only files: a held container is never recreated by a release.
 */
import { MeshpError, oneLine } from '../errors.js';
import type { Host } from '../host/host.js';
import type { Records, Seen } from './rule.js';
import { canonicalJson, sha256 } from './handlers.js';
import { handlersOf, loadRecords } from './reconciler.js';
import { originalMode, type UntakeBlock, type UntakeStep } from './untake-rule.js';

/** The host's note of a release --restore under way (its module and preview id), cleared when it ends. */
export const RELEASE_KEY = 'release.running';

export interface ReleasePlan {
  node: string;
  module: string;
  steps: UntakeStep[];
  blocks: UntakeBlock[];
  id: string;
}

/** The module's held files: found (an original recorded) and not the host's own. */
export function heldFiles(records: Records, module: string): string[] {
  return [...records.originals.values()]
    .filter((o) => o.module === module && o.kind === 'file' && !records.owned.has(o.key))
    .map((o) => o.key)
    .sort();
}

/** Pure: what release --restore does to each held file of the module. */
export function planRelease(node: string, module: string, records: Records, seen: Map<string, Seen>): ReleasePlan {
  const steps: UntakeStep[] = [];
  const blocks: UntakeBlock[] = [];
  for (const key of heldFiles(records, module)) {
    const path = key.slice('file:'.length);
    const o = records.originals.get(key)!;
    const s = seen.get(key) ?? null;
    if (s instanceof Error) {
      blocks.push({ key, code: 'MESHP_UNTAKE_UNREADABLE', reason: oneLine(s) });
      continue;
    }
    if (s !== null && s.fingerprint === o.fingerprint) {
      steps.push({ key, kind: 'file', op: 'keep', what: `${path}: unchanged since it was found; left as it is` });
      continue;
    }
    const owner = o.meta?.uid !== undefined ? `, owner ${o.meta.uid}:${o.meta.gid ?? o.meta.uid}` : '';
    const mode = (originalMode(o) & 0o7777).toString(8).padStart(4, '0');
    const was = s === null ? 'removed while held' : 'changed while held';
    steps.push({ key, kind: 'file', op: 'restore', what: `${path}: ${was}; its original back (${o.original.length} bytes, mode ${mode}${owner})` });
  }
  const now = [...seen].map(([k, s]) => [k, s === null ? null : s instanceof Error ? 'error' : s.fingerprint]);
  const id = sha256(canonicalJson({ node, module, release: true, steps, blocks: blocks.map((b) => [b.key, b.code]), now })).slice(0, 16);
  return { node, module, steps, blocks, id };
}

/** Previews or does a release --restore of `module`'s held files on the machine the host runs on. */
export async function releaseRestore(host: Host, node: string, module: string, options: { preview?: boolean; previewId?: string } = {}): Promise<ReleasePlan> {
  const store = await host.state();
  const records = await loadRecords(store);
  const handlers = await handlersOf(host);
  const seen = new Map<string, Seen>();
  for (const key of heldFiles(records, module)) {
    try {
      seen.set(key, (await handlers.file?.observe(key.slice('file:'.length))) ?? null);
    } catch (e) {
      seen.set(key, e instanceof Error ? e : new Error(String(e)));
    }
  }
  const plan = planRelease(node, module, records, seen);
  if (options.preview) return plan;
  // Run again after a kill: what it put back already reads unchanged, so its plan is not the preview; the note says it was.
  const running = await store.getValue<{ module: string; id: string }>(RELEASE_KEY);
  const resuming = running?.module === module && running.id === options.previewId;
  if (!resuming && options.previewId !== undefined && options.previewId !== plan.id) {
    throw new MeshpError(
      'MESHP_PREVIEW_STALE',
      `the machine changed since preview ${options.previewId}: release of ${module} now is preview ${plan.id}; nothing changed`,
    );
  }
  if (plan.blocks.length > 0) {
    throw new MeshpError(plan.blocks[0]!.code, `module ${module}'s held files cannot be read; nothing changed: ${plan.blocks.map((b) => b.reason).join('; ')}`);
  }
  const files = await host.files();
  if (!files) throw new MeshpError('MESHP_PROVIDER_MISSING', 'no file plugin loaded can restore a held file');
  await store.setValue(RELEASE_KEY, { module, id: options.previewId ?? plan.id });
  for (const step of plan.steps) {
    if (step.op !== 'restore') continue;
    const o = records.originals.get(step.key)!;
    const s = seen.get(step.key);
    const identity = s && !(s instanceof Error) ? (s.identity ?? null) : null;
    const owner = o.meta?.uid !== undefined ? { owner: { uid: o.meta.uid, gid: o.meta.gid ?? o.meta.uid } } : {};
    const written = await files.write(step.key.slice('file:'.length), o.original, originalMode(o), { expect: identity, ...owner });
    await store.refound(step.key, o.fingerprint, written ?? null);
  }
  await store.setValue(RELEASE_KEY, null);
  return plan;
}

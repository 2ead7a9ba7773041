/**
 * Untake's rule (issue 29, docs/adr/0027-untake-puts-back-what-the-take-changed.md), one pure function: a
 * taken module, the host's records and what is there now → what untake does to each resource the take
 * changed, or what blocks it. No I/O here. Untake puts back only what the take changed: a found file
 * its original (bytes, mode, owner), a found container its predecessor (recreated from its recorded
 * inspect document, its volumes reattached); what the mesh made where nothing was found was made by
 * the assignment and stays, as an assigned module keeps it. Anything it cannot put back faithfully
 * blocks the whole untake, and nothing changes.
 */
import { createTwoFilesPatch } from 'diff';
import type { ModuleDecl } from '../contract/model.js';
import { resourceKey, toOpening } from '../contract/model.js';
import type { OriginalRecord, OwnedRecord, Restorability } from '../contract/providers.js';
import type { ErrorCode } from '../codes.js';
import { oneLine } from '../errors.js';
import { canonicalJson, sha256 } from './handlers.js';
import type { Records, Seen } from './rule.js';

export type UntakeOp = 'restore' | 'remove' | 'recreate' | 'close' | 'keep';

export interface UntakeStep {
  key: string;
  kind: 'file' | 'container' | 'opening';
  op: UntakeOp;
  /** What untake does to it, in an operator's words. */
  what: string;
}

export interface UntakeBlock {
  key: string;
  code: ErrorCode;
  reason: string;
  /** A file changed since the take: what the mesh wrote against what is there now. */
  diff?: string;
}

export interface UntakePlan {
  node: string;
  module: string;
  steps: UntakeStep[];
  blocks: UntakeBlock[];
  /** The preview id: the same plan on the same machine gives the same id (`--preview-id`). */
  id: string;
}

export interface UntakeInput {
  node: string;
  module: ModuleDecl;
  records: Records;
  /** What is there now, by key, for every file and container the module declares or the records name. */
  seen: Map<string, Seen>;
  /** A recorded container's restorability, by key; absent: no runtime can recreate it. */
  restorable: Map<string, Restorability | Error>;
  /** What the mesh wrote of a declared file (its content), by key, for the diff of a file changed since. */
  written: Map<string, string>;
  /** The bytes of each file there now, by key, for that diff. */
  now: Map<string, Uint8Array>;
  /** An untake of this module was interrupted (killed): what it already put back is put back again, not a change by something else. */
  resuming?: boolean;
}

type Outcome = UntakeStep | UntakeBlock;

function octal(mode: number): string {
  return (mode & 0o7777).toString(8).padStart(4, '0');
}

/** The mode kept with a file's original: its meta, else the mode part of its fingerprint ("sha:mode"). */
export function originalMode(original: OriginalRecord): number {
  if (original.meta?.mode !== undefined) return original.meta.mode;
  const m = /:([0-7]{3,4})$/.exec(original.fingerprint);
  return m ? parseInt(m[1]!, 8) : 0o644;
}

function textOf(bytes: Uint8Array): string {
  return new TextDecoder('utf-8', { fatal: false }).decode(bytes);
}

function fileChanged(key: string, owned: OwnedRecord, seen: Seen, input: UntakeInput): UntakeBlock | null {
  const path = key.slice('file:'.length);
  if (seen === null) return { key, code: 'MESHP_UNTAKE_CHANGED', reason: `${path} was removed since the take by something else; restoring would undo that` };
  if (seen instanceof Error) return null;
  if (seen.digest === owned.digest) return null;
  if (input.resuming && seen.fingerprint === input.records.originals.get(key)?.fingerprint) return null;
  const block: UntakeBlock = {
    key,
    code: 'MESHP_UNTAKE_CHANGED',
    reason: `${path} changed since the take by something else; restoring would lose that change`,
  };
  const wrote = input.written.get(key);
  const now = input.now.get(key);
  if (wrote !== undefined && now) block.diff = createTwoFilesPatch(`${path} (as the take wrote it)`, `${path} (now)`, wrote, textOf(now));
  return block;
}

function untakeFile(key: string, owned: OwnedRecord, input: UntakeInput): Outcome | null {
  const path = key.slice('file:'.length);
  const original = input.records.originals.get(key);
  const seen = input.seen.get(key) ?? null;
  if (seen instanceof Error) return { key, code: 'MESHP_UNTAKE_UNREADABLE', reason: oneLine(seen) };
  if (!original) {
    if (owned.made === true)
      return { key, kind: 'file', op: 'keep', what: `${path}: made by the mesh where nothing was (by the assignment); stays, as an assigned module keeps it` };
    return {
      key,
      code: 'MESHP_UNTAKE_NO_ORIGINAL',
      reason: `${path} is the mesh's, and whether it was found or made is not recorded (a record from before untake); its original cannot be put back`,
    };
  }
  const changed = fileChanged(key, owned, seen, input);
  if (changed) return changed;
  // Held, then removed by something else before the take: the take made it, untake removes it.
  if (original.lastFingerprint === null && original.changedAt !== null) {
    return { key, kind: 'file', op: 'remove', what: `${path}: was gone when the module was taken, the take made it; removed` };
  }
  const meta = original.meta;
  const owner = meta?.uid !== undefined ? `, owner ${meta.uid}:${meta.gid ?? meta.uid}` : ', owner as it is now (not recorded)';
  return {
    key,
    kind: 'file',
    op: 'restore',
    what: `${path}: restored to its original (${original.original.length} bytes, mode ${octal(originalMode(original))}${owner})`,
  };
}

function untakeContainer(key: string, owned: OwnedRecord, input: UntakeInput): Outcome | null {
  const name = key.slice('container:'.length);
  const original = input.records.originals.get(key);
  const seen = input.seen.get(key) ?? null;
  if (seen instanceof Error) return { key, code: 'MESHP_UNTAKE_UNREADABLE', reason: oneLine(seen) };
  if (!original) {
    if (owned.made === true)
      return { key, kind: 'container', op: 'keep', what: `container ${name}: made by the mesh where none was (by the assignment); stays` };
    return {
      key,
      code: 'MESHP_UNTAKE_NO_ORIGINAL',
      reason: `container ${name} is the mesh's, and whether it replaced one is not recorded; nothing to recreate it from`,
    };
  }
  // Resuming, what holds the name may be the predecessor recreated already: recreated again, the same way.
  if (seen !== null && seen.digest !== owned.digest && !input.resuming) {
    return { key, code: 'MESHP_UNTAKE_CHANGED', reason: `container ${name} is not the one the take made (replaced or stopped since by something else)` };
  }
  const r = input.restorable.get(key);
  if (!r) return { key, code: 'MESHP_PROVIDER_MISSING', reason: `no container runtime loaded can recreate container ${name}` };
  if (r instanceof Error) return { key, code: 'MESHP_UNTAKE_UNREADABLE', reason: oneLine(r) };
  if (r.image === 'gone') {
    return {
      key,
      code: 'MESHP_UNTAKE_IMAGE_GONE',
      reason: `the image of the replaced container ${name} (${r.reference}, ${r.imageId}) is no longer on this machine; nothing is pulled`,
    };
  }
  if (r.volumesGone.length > 0) {
    return {
      key,
      code: 'MESHP_UNTAKE_VOLUME_GONE',
      reason: `volume ${r.volumesGone.join(', ')} the replaced container ${name} used has been removed; it would be recreated empty`,
    };
  }
  const image = r.referenceMoved ? `image ${r.imageId} (its reference ${r.reference} now names another)` : `image ${r.reference} (${r.imageId.slice(0, 19)})`;
  const volumes = r.volumes.length > 0 ? `, volumes ${r.volumes.join(', ')} reattached` : '';
  return {
    key,
    kind: 'container',
    op: 'recreate',
    what: `container ${name}: the mesh's removed, the predecessor recreated from its recorded spec, ${image}${volumes}`,
  };
}

function idOf(plan: Omit<UntakePlan, 'id'>, seen: Map<string, Seen>): string {
  const now = [...seen].map(([k, s]) => [k, s === null ? null : s instanceof Error ? 'error' : s.fingerprint]);
  return sha256(canonicalJson({ node: plan.node, module: plan.module, steps: plan.steps, blocks: plan.blocks.map((b) => [b.key, b.code]), now })).slice(0, 16);
}

/** What untake does to each resource the module's take changed, or why it cannot. */
export function planUntake(input: UntakeInput): UntakePlan {
  const { module: m, records } = input;
  const steps: UntakeStep[] = [];
  const blocks: UntakeBlock[] = [];
  const keys = new Set<string>();
  for (const f of m.files ?? []) keys.add(resourceKey('file', f.path));
  for (const c of m.containers ?? []) keys.add(resourceKey('container', c.name));
  for (const r of records.owned.values()) if (r.module === m.name && r.kind !== 'opening') keys.add(r.key);
  for (const key of [...keys].sort()) {
    const owned = records.owned.get(key);
    if (!owned) continue; // held still, or never written: the take did not change it
    const out = key.startsWith('file:') ? untakeFile(key, owned, input) : untakeContainer(key, owned, input);
    if (out === null) continue;
    if ('code' in out) blocks.push(out);
    else steps.push(out);
  }
  // The module holds found resources again only if something is put back; then its openings wait for the next take.
  const holdsAgain = steps.some((s) => s.op === 'restore' || s.op === 'recreate');
  for (const spec of holdsAgain ? (m.openings ?? []) : []) {
    const o = toOpening(m.name, spec);
    steps.push({
      key: resourceKey('opening', o.id),
      kind: 'opening',
      op: 'close',
      what: `opening ${o.id}: removed (the module holds found resources again; its port waits for the next take)`,
    });
  }
  const plan = { node: input.node, module: m.name, steps, blocks };
  return { ...plan, id: idOf(plan, input.seen) };
}

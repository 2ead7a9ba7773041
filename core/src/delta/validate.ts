import { MeshpError } from '../errors.js';
import { COMPONENT_NAMES, REMOVAL_REASON, WIRE_MODE, type StateDelta } from '../contract/wire.js';

export interface DeltaLimits {
  /** Most upserts + removals one message may carry; more is refused as oversized. */
  maxEntries: number;
  /** Most peers a view may hold after a delta. */
  maxPeers: number;
}

export const DEFAULT_LIMITS: DeltaLimits = Object.freeze({ maxEntries: 1_000_000, maxPeers: 1_000_000 });

function invalid(message: string, details: Record<string, unknown> = {}): MeshpError {
  return new MeshpError('MESHP_DELTA_INVALID', message, { details });
}

function isVersion(n: unknown): n is number {
  return typeof n === 'number' && Number.isSafeInteger(n) && n >= 0;
}

/**
 * Checks a delta on its own (no view): shapes, versions, reasons, sizes. Throws
 * MESHP_DELTA_INVALID; the caller has changed nothing yet.
 */
export function validateDelta(delta: StateDelta, limits: DeltaLimits = DEFAULT_LIMITS): void {
  if (delta === null || typeof delta !== 'object') throw invalid('a delta must be a message');
  const { fromVersion: from, toVersion: to } = delta;
  if (!isVersion(from) || !isVersion(to)) throw invalid(`versions must be whole numbers ≥ 0 (from ${String(from)}, to ${String(to)})`);
  if (to === 0) throw invalid('a delta must lead to a version ≥ 1');
  if (from !== 0 && from >= to) throw invalid(`from_version ${from} is not below to_version ${to}`, { from, to });
  if (!Array.isArray(delta.upsertPeers) || !Array.isArray(delta.removePeers)) throw invalid('peers must be lists');
  const entries = delta.upsertPeers.length + delta.removePeers.length;
  if (entries > limits.maxEntries) {
    throw invalid(`the delta carries ${entries} entries, more than the ${limits.maxEntries} allowed (oversized)`, { entries });
  }
  if (from === 0 && delta.removePeers.length > 0) throw invalid('a snapshot carries no removals');
  const removed = new Set<string>();
  for (const r of delta.removePeers) {
    if (!r || typeof r.id !== 'string' || r.id === '') throw invalid('a removal needs a peer id');
    if (r.reason !== REMOVAL_REASON.REMOVED && r.reason !== REMOVAL_REASON.UNSCOPED) {
      throw invalid(`removal of ${r.id} has unknown reason ${String(r.reason)}`, { id: r.id, reason: r.reason });
    }
    if (removed.has(r.id)) throw invalid(`peer ${r.id} is removed twice`, { id: r.id });
    removed.add(r.id);
  }
  const upserted = new Set<string>();
  for (const p of delta.upsertPeers) {
    if (!p || typeof p.id !== 'string' || p.id === '') throw invalid('an upserted peer needs an id');
    if (typeof p.nodeKey !== 'string') throw invalid(`peer ${p.id} has no node key`, { id: p.id });
    for (const list of [p.addresses, p.tags, p.endpoints]) {
      if (!Array.isArray(list) || list.some((x) => typeof x !== 'string')) throw invalid(`peer ${p.id} has a malformed list`, { id: p.id });
    }
    if (upserted.has(p.id)) throw invalid(`peer ${p.id} is upserted twice`, { id: p.id });
    upserted.add(p.id);
  }
  for (const name of COMPONENT_NAMES) {
    const c = delta[name];
    if (c !== undefined && (c === null || typeof c !== 'object')) throw invalid(`component ${name} is malformed`);
  }
  const decl = delta.declaration;
  if (decl !== undefined && decl.mode !== WIRE_MODE.ADOPTED && decl.mode !== WIRE_MODE.CONVERGED) {
    throw invalid(`the declaration has unknown mode ${String(decl.mode)}`, { mode: decl.mode });
  }
  if (delta.part !== undefined) {
    const { index, count } = delta.part;
    if (!isVersion(index) || !isVersion(count) || count < 1 || index >= count) {
      throw invalid(`part ${String(index)} of ${String(count)} is not valid`);
    }
  }
}

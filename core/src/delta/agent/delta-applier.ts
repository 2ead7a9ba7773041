import type { ViewChange } from '../../contract/plan.js';
import { MeshpError, isMeshpError } from '../../errors.js';
import { applyDelta } from './next-view.js';
import { DEFAULT_LIMITS, validateDelta, type DeltaLimits } from '../validate.js';
import { AgentView } from './view.js';
import { COMPONENT_NAMES, type StateDelta } from '../../contract/wire.js';

/** What the agent answers after applying: only this moves the controller's applied version. */
export interface Ack {
  appliedVersion: number;
  stateHash: string;
}

export interface AppliedRecord {
  fromVersion: number;
  toVersion: number;
  upserted: number;
  removed: number;
  unscoped: number;
  components: string[];
  stateHash: string;
}

export type ReceiveResult =
  | { status: 'applied'; change: ViewChange; ack: Ack }
  /** Already applied (a duplicate, or older than the view): nothing to do, nothing to ack. */
  | { status: 'stale' }
  /** One part of a several-part delta: held until the last part. */
  | { status: 'partial' };

export const RESYNC = Object.freeze({ GAP: 1, INVALID: 2, STORE: 3 });

/**
 * The agent's side of the stream: keeps the view, applies what arrives in order, refuses the rest.
 * A refusal throws MESHP_DELTA_GAP or MESHP_DELTA_INVALID with the view untouched; the agent then
 * sends `resyncRequest(err)` and waits for a snapshot. The last `keep` applied deltas are kept for doctor.
 */
export class DeltaApplier {
  readonly view = new AgentView();
  readonly recent: AppliedRecord[] = [];
  readonly #limits: DeltaLimits;
  readonly #keep: number;
  #parts: StateDelta[] = [];

  constructor(options: { limits?: Partial<DeltaLimits>; keep?: number } = {}) {
    this.#limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.#keep = options.keep ?? 16;
  }

  get appliedVersion(): number {
    return this.view.version;
  }

  /** The first message on every stream. */
  hello(): Ack {
    return { appliedVersion: this.view.version, stateHash: this.view.hash() };
  }

  receive(delta: StateDelta): ReceiveResult {
    try {
      return this.#receive(delta);
    } catch (e) {
      this.#parts = [];
      throw e;
    }
  }

  resyncRequest(err: unknown): { appliedVersion: number; reason: number; detail: string } {
    const reason = isMeshpError(err, 'MESHP_DELTA_GAP') ? RESYNC.GAP : isMeshpError(err) && err.code === 'MESHP_DELTA_INVALID' ? RESYNC.INVALID : RESYNC.STORE;
    const detail = isMeshpError(err) ? err.oneLine() : String(err);
    return { appliedVersion: this.view.version, reason, detail };
  }

  /** Rebuilds the view from a stored snapshot (the host store keeps `view.toSnapshot()`). */
  restore(snapshot: StateDelta): void {
    applyDelta(this.view, snapshot, { maxEntries: Number.MAX_SAFE_INTEGER, maxPeers: Number.MAX_SAFE_INTEGER });
  }

  #receive(delta: StateDelta): ReceiveResult {
    validateDelta(delta, this.#limits);
    if (this.#isStale(delta)) return { status: 'stale' };
    const part = delta.part;
    if (part !== undefined && part.count > 1) {
      const first = this.#parts[0];
      if (part.index === 0) this.#parts = [delta];
      else if (!first || first.fromVersion !== delta.fromVersion || first.toVersion !== delta.toVersion || this.#parts.length !== part.index) {
        throw new MeshpError('MESHP_DELTA_GAP', `part ${part.index} of ${part.count} of delta ${delta.fromVersion}→${delta.toVersion} arrived out of order`);
      } else this.#parts.push(delta);
      if (part.index < part.count - 1) return { status: 'partial' };
      delta = joinParts(this.#parts);
      this.#parts = [];
    }
    const change = applyDelta(this.view, delta, { maxEntries: Number.MAX_SAFE_INTEGER, maxPeers: this.#limits.maxPeers });
    const ack = { appliedVersion: this.view.version, stateHash: this.view.hash() };
    this.recent.push({
      fromVersion: change.fromVersion,
      toVersion: change.toVersion,
      upserted: change.upserted.length,
      removed: change.removed.length,
      unscoped: change.unscoped.length,
      components: change.components,
      stateHash: ack.stateHash,
    });
    if (this.recent.length > this.#keep) this.recent.splice(0, this.recent.length - this.#keep);
    return { status: 'applied', change, ack };
  }

  #isStale(delta: StateDelta): boolean {
    if (delta.fromVersion === 0) return delta.toVersion < this.view.version;
    return delta.toVersion <= this.view.version && delta.fromVersion < this.view.version;
  }
}

export function joinParts(parts: StateDelta[]): StateDelta {
  const first = parts[0];
  if (!first) throw new MeshpError('MESHP_DELTA_INVALID', 'no parts to join');
  const last = parts.at(-1)!;
  const out: StateDelta = {
    fromVersion: first.fromVersion,
    toVersion: first.toVersion,
    upsertPeers: [],
    removePeers: [],
    network: first.network,
    stateHash: last.stateHash,
    versionSignature: last.versionSignature,
  };
  for (const p of parts) {
    out.upsertPeers.push(...p.upsertPeers);
    out.removePeers.push(...p.removePeers);
    for (const name of COMPONENT_NAMES) if (p[name] !== undefined) Object.assign(out, { [name]: p[name] });
  }
  return out;
}

/** Splits a delta into messages of at most `maxEntries` peers each; the agent commits at the last. */
export function splitDelta(delta: StateDelta, maxEntries: number): StateDelta[] {
  const entries = delta.upsertPeers.length + delta.removePeers.length;
  if (entries <= maxEntries) return [delta];
  const count = Math.ceil(entries / maxEntries);
  const out: StateDelta[] = [];
  const removes = [...delta.removePeers];
  const upserts = [...delta.upsertPeers];
  for (let index = 0; index < count; index++) {
    const removePeers = removes.splice(0, maxEntries);
    const upsertPeers = upserts.splice(0, maxEntries - removePeers.length);
    const part: StateDelta = {
      fromVersion: delta.fromVersion,
      toVersion: delta.toVersion,
      upsertPeers,
      removePeers,
      network: delta.network,
      part: { index, count },
      stateHash: delta.stateHash,
      versionSignature: delta.versionSignature,
    };
    if (index === 0) for (const name of COMPONENT_NAMES) if (delta[name] !== undefined) Object.assign(part, { [name]: delta[name] });
    out.push(part);
  }
  return out;
}

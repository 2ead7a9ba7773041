/**
 * A relayed peer goes back to direct when a direct path opens later (issue 27, ADR 0046). The device
 * holds one endpoint per peer, so a direct candidate can only be tried by setting it in place of the
 * relay for a while: a bounded trial, the first DIRECT_FIRST_MS after the peer went relayed, then
 * after twice as long each time it fails, up to DIRECT_CAP_MS.
 *
 * A trial sets the peer's next direct candidate and sends one keepalive to it at once (the plugin
 * turns the peer's persistent keepalive off and on: WireGuard sends a keepalive when it is turned on).
 * It is judged from the device, never assumed, after DIRECT_WINDOW_MS (one REKEY_TIMEOUT): WireGuard
 * sets a peer's endpoint to the source of its last authenticated packet, so while the peer's packets
 * still come through the relay the device goes back to the proxy's socket by itself. A trial that
 * ends with the device's endpoint not the proxy's socket and rx grown since the trial's endpoint
 * was set has had an authenticated packet from the direct path: kept. Anything else: the relay is
 * set again (with a keepalive through it, so a peer that roamed to the blocked direct path comes back
 * at once), and the next trial waits twice as long.
 *
 * A peer whose device roamed to a direct path by itself (the other side's trial succeeded and its
 * packets now come direct) is direct too: `roamed` says so.
 */
import type { PeerConfig } from './peer-config.js';
import type { DeviceState } from './uapi.js';
import { HANDSHAKE_FRESH_S } from './candidates.js';

/** The first trial after a peer went relayed. */
export const DIRECT_FIRST_MS = 60_000;
/** The longest wait between two trials. */
export const DIRECT_CAP_MS = 16 * 60_000;
/** How long a trial runs before it is judged: WireGuard's REKEY_TIMEOUT. */
export const DIRECT_WINDOW_MS = 5_000;

export interface DirectTrialOptions {
  firstMs?: number;
  capMs?: number;
  windowMs?: number;
}

interface Entry {
  /** When the next trial starts. */
  nextAt: number;
  /** The wait after the next failure. */
  backoffMs: number;
  /** Which direct candidate the next trial sets (round and round). */
  turn: number;
  trial?: { startedAt: number; endpoint: string; rx0: number | null };
}

export type DirectMove =
  /** Start a trial: set this direct endpoint now (and kick a keepalive to it). */
  | { kind: 'try'; id: string; endpoint: string }
  /** The trial proved a direct path (or the device roamed to one): keep what the device has. */
  | { kind: 'direct'; id: string; endpoint: string }
  /** The trial failed: the relay's socket again (and a keepalive through it). */
  | { kind: 'relay'; id: string; endpoint: string };

export class DirectTrials {
  readonly #peers = new Map<string, Entry>();
  readonly firstMs: number;
  readonly capMs: number;
  readonly windowMs: number;

  constructor(o: DirectTrialOptions = {}) {
    this.firstMs = o.firstMs ?? DIRECT_FIRST_MS;
    this.capMs = Math.max(this.firstMs, o.capMs ?? DIRECT_CAP_MS);
    this.windowMs = o.windowMs ?? DIRECT_WINDOW_MS;
  }

  /** Whether a trial runs for the peer now (its endpoint is not to be moved by anything else). */
  trying(id: string): boolean {
    return !!this.#peers.get(id)?.trial;
  }

  /**
   * What to do now for the peers on the relay. `onRelay(id)`: the peer's relayed socket when the
   * plugin has it on the relay (its chosen path), else undefined; `isProxy`: whether an endpoint is
   * one of this node's relay sockets.
   */
  next(
    configured: ReadonlyMap<string, PeerConfig>,
    state: DeviceState,
    nowMs: number,
    onRelay: (id: string) => string | undefined,
    isProxy: (endpoint: string) => boolean,
  ): DirectMove[] {
    const onDevice = new Map(state.peers.map((p) => [p.publicKey, p]));
    const out: DirectMove[] = [];
    for (const [id, c] of configured) {
      const local = onRelay(id);
      const direct = (c.candidates ?? []).filter((e) => e !== local && !isProxy(e));
      const d = onDevice.get(c.publicKey);
      const e = this.#peers.get(id);
      if (!local || direct.length === 0 || !d) {
        this.#peers.delete(id);
        continue;
      }
      const endpoint = d.endpoint && d.endpoint !== '(none)' ? d.endpoint : '';
      if (e?.trial) {
        if (e.trial.rx0 === null) continue; // set, not read back yet (started)
        if (nowMs - e.trial.startedAt < this.windowMs) continue;
        if (endpoint && !isProxy(endpoint) && d.rxBytes > e.trial.rx0) {
          this.#peers.delete(id);
          out.push({ kind: 'direct', id, endpoint });
          continue;
        }
        delete e.trial;
        e.nextAt = nowMs + e.backoffMs;
        e.backoffMs = Math.min(e.backoffMs * 2, this.capMs);
        out.push({ kind: 'relay', id, endpoint: local });
        continue;
      }
      const fresh = d.lastHandshake > 0 && nowMs / 1000 - d.lastHandshake <= HANDSHAKE_FRESH_S;
      if (endpoint && !isProxy(endpoint) && fresh) {
        // Roamed to a direct path by itself: an authenticated packet came from it.
        this.#peers.delete(id);
        out.push({ kind: 'direct', id, endpoint });
        continue;
      }
      if (!fresh || endpoint !== local) {
        // Not carried by the relay (yet): the candidates' own trials (candidates.ts) run.
        this.#peers.delete(id);
        continue;
      }
      if (!e) {
        this.#peers.set(id, { nextAt: nowMs + this.firstMs, backoffMs: this.firstMs * 2, turn: 0 });
        continue;
      }
      if (nowMs < e.nextAt) continue;
      const to = direct[e.turn % direct.length]!;
      e.turn++;
      e.trial = { startedAt: nowMs, endpoint: to, rx0: null };
      out.push({ kind: 'try', id, endpoint: to });
    }
    for (const id of this.#peers.keys()) if (!configured.has(id)) this.#peers.delete(id);
    return out;
  }

  /** The trial's endpoint is on the device: its rx read back now, from when the window counts. */
  started(id: string, rxBytes: number, nowMs: number): void {
    const t = this.#peers.get(id)?.trial;
    if (t) Object.assign(t, { rx0: rxBytes, startedAt: nowMs });
  }

  /** The peer's trial is abandoned (its endpoint set by something else: a view change): the next waits as after a failure. */
  forget(id: string): void {
    this.#peers.delete(id);
  }
}

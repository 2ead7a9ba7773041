/**
 * Every candidate endpoint of a peer tried in turn (issue 27). The device holds one endpoint per
 * peer; a peer with several (told, the NAT mapping the control-node's device saw, the address its
 * stream came from) gets the next one when no handshake came within ENDPOINT_TRY_MS on the one set,
 * and keeps the one that handshakes. WireGuard itself then follows the peer (roaming: the endpoint
 * becomes the source of its last authenticated packet), so a peer that reached this node first is
 * never moved away from the endpoint that works.
 */
import type { PeerConfig } from './peer-config.js';
import type { DeviceState } from './uapi.js';

/**
 * How long one candidate is given: WireGuard retries a handshake every REKEY_TIMEOUT (5 s), so three
 * initiations reach a live endpoint, or open a NAT's mapping from both sides at once.
 */
export const ENDPOINT_TRY_MS = 15_000;
/** A handshake older than REJECT_AFTER_TIME (180 s) carries nothing any more: the peer is tried again. */
export const HANDSHAKE_FRESH_S = 180;

/** The endpoint a peer is configured with: the one the device uses if it is still a candidate (chosen, or roamed to), else the first. */
export function keepChosen(conf: PeerConfig, inUse: string | undefined): PeerConfig {
  if (!inUse || !conf.candidates?.includes(inUse) || conf.endpoint === inUse) return conf;
  return { ...conf, endpoint: inUse };
}

/** Since when each peer (by public key) has had no fresh handshake on the endpoint it has now. */
export class EndpointTrials {
  readonly #since = new Map<string, number>();
  constructor(readonly tryMs = ENDPOINT_TRY_MS) {}

  /**
   * The peers to move to their next candidate now: more than one candidate, no handshake within
   * HANDSHAKE_FRESH_S, and the endpoint they have was given tryMs. `skip`: peers not to move (in grace).
   */
  next(configured: ReadonlyMap<string, PeerConfig>, state: DeviceState, nowMs: number, skip: (id: string) => boolean = () => false): [string, PeerConfig][] {
    const onDevice = new Map(state.peers.map((p) => [p.publicKey, p]));
    const out: [string, PeerConfig][] = [];
    const keys = new Set<string>();
    for (const [id, c] of configured) {
      keys.add(c.publicKey);
      const d = onDevice.get(c.publicKey);
      const fresh = !!d && d.lastHandshake > 0 && nowMs / 1000 - d.lastHandshake <= HANDSHAKE_FRESH_S;
      if (fresh || skip(id) || (c.candidates?.length ?? 0) < 2) {
        this.#since.delete(c.publicKey);
        continue;
      }
      const since = this.#since.get(c.publicKey);
      if (since === undefined) {
        this.#since.set(c.publicKey, nowMs);
        continue;
      }
      if (nowMs - since < this.tryMs) continue;
      const list = c.candidates!;
      const at = list.indexOf(d?.endpoint ?? c.endpoint ?? '');
      out.push([id, { ...c, endpoint: list[(at + 1) % list.length]! }]);
      this.#since.set(c.publicKey, nowMs);
    }
    for (const k of this.#since.keys()) if (!keys.has(k)) this.#since.delete(k);
    return out;
  }
}

/**
 * Ephemeral nodes (issue 28, ADR 0042): a node enrolled with an ephemeral token is removed, as
 * `meshp node remove` removes one (its peers get one delta, its credential and key are revoked,
 * the audit log records it with the actor `ephemeral`), once it has had no stream for its grace.
 *
 * Every sweep looks at the members whose record says ephemeral. One whose stream is here is seen
 * now; with replicas on one database, each writes the time it saw the streams it holds
 * (`markSeenAsync`) and reads the others' (`lastSeenAsync`), and waits two sweeps more than the
 * grace before it removes a node another replica may hold (the holder writes once a sweep). When
 * a node was last seen is the latest of: its stream's end here, another replica's word, and when
 * this controller first looked at it (a controller just started gives every node its grace again).
 * Two replicas removing the same node at once: the second finds it gone (MESHP_NOT_FOUND), said
 * nowhere, nothing changed.
 */
import { isMeshpError, type AuthBook } from '@meshp/core';
import { oneLine } from '@meshp/core/util';
import type { Controller } from '../controller.js';
import type { Liveness } from '../status.js';
import type { Logger } from './log.js';

/** How often the ephemeral nodes are looked at, by default. */
export const DEFAULT_EPHEMERAL_SWEEP_MS = 5_000;

/** The actor the audit log names for a removal the controller made itself. */
export const EPHEMERAL_ACTOR = 'ephemeral';

export interface ReaperDeps {
  controller: Controller;
  auth: AuthBook;
  live(network: string, node: string): Liveness;
  /** `node remove` as an admin call by EPHEMERAL_ACTOR (admin.ts `as`). */
  remove(network: string, node: string): Promise<unknown>;
  log: Logger;
  sweepMs: number;
  now?: () => number;
}

export class EphemeralReaper {
  readonly #d: ReaperDeps;
  readonly #now: () => number;
  /** When this controller first looked at each ephemeral member (network \0 node). */
  readonly #noticed = new Map<string, number>();
  #timer: ReturnType<typeof setTimeout> | null = null;
  #running: Promise<void> | null = null;
  #stopped = false;

  constructor(d: ReaperDeps) {
    this.#d = d;
    this.#now = d.now ?? Date.now;
  }

  start(): void {
    this.#stopped = false;
    this.#schedule();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    await this.#running;
  }

  #schedule(): void {
    if (this.#stopped) return;
    this.#timer = setTimeout(() => {
      this.#running = this.sweep()
        .then(
          () => undefined,
          (e: unknown) => this.#d.log.warn({ err: oneLine(e) }, 'ephemeral nodes not looked at: the store refused (again at the next sweep)'),
        )
        .finally(() => {
          this.#running = null;
          this.#schedule();
        });
    }, this.#d.sweepMs);
    this.#timer.unref();
  }

  /** One look at every network's ephemeral nodes; the nodes removed (as `network/node`). */
  async sweep(): Promise<string[]> {
    const { controller, auth, live } = this.#d;
    const removed: string[] = [];
    const now = this.#now();
    const looked = new Set<string>();
    for (const net of controller.networks()) {
      const eph = controller.members(net).filter((m) => m.ephemeralSeconds);
      if (eph.length === 0) continue;
      const here = eph.filter((m) => live(net, m.id).connected).map((m) => m.id);
      const shared = !!auth.markSeenAsync && !!auth.lastSeenAsync;
      if (shared && here.length) await auth.markSeenAsync!(net, here, new Date(now).toISOString());
      const elsewhere = shared ? await auth.lastSeenAsync!(net) : new Map<string, string>();
      // A replica that holds the stream writes once a sweep: two sweeps of slack before its word is stale.
      const slack = shared ? 2 * this.#d.sweepMs : 0;
      for (const m of eph) {
        const key = `${net}\u0000${m.id}`;
        looked.add(key);
        if (!this.#noticed.has(key)) this.#noticed.set(key, now);
        const l = live(net, m.id);
        if (l.connected) continue;
        const seen = Math.max(this.#noticed.get(key)!, Date.parse(l.lastContact ?? '') || 0, Date.parse(elsewhere.get(m.id) ?? '') || 0);
        if (now - seen <= m.ephemeralSeconds! * 1000 + slack) continue;
        try {
          await this.#d.remove(net, m.id);
          removed.push(`${net}/${m.id}`);
          this.#d.log.info(
            { network: net, node: m.id, graceSeconds: m.ephemeralSeconds, goneSeconds: Math.round((now - seen) / 1000) },
            'ephemeral node removed: gone past its grace',
          );
        } catch (e) {
          // Removed meanwhile (by the operator, or another replica): nothing to do.
          if (!isMeshpError(e, 'MESHP_NOT_FOUND')) throw e;
        }
      }
    }
    for (const k of [...this.#noticed.keys()]) if (!looked.has(k)) this.#noticed.delete(k);
    return removed;
  }
}

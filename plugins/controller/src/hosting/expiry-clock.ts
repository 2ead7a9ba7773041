/**
 * The clock that turns a node's expiry into a change (issue 28, docs/adr/0041). A view is a function
 * of the state, never of the time: when a node's expiry comes, the controller records it expired (one
 * version per network, Controller.expireDue), its peers are pumped and drop it in one delta, and its
 * own stream ends MESHP_NODE_EXPIRED. The timer is set for the earliest expiry, and at least once a
 * minute (a replica learns of another's renewals without being told); a change that moves an expiry
 * earlier (an admin's renewal with a short term) sets it again at once.
 */
import { oneLine } from '@meshp/core/util';
import type { Controller } from '../controller.js';
import type { Logger } from './log.js';

/** The longest the clock sleeps without looking: a minute. */
export const EXPIRY_LOOK_MS = 60_000;

export interface ExpiryClockDeps {
  controller: Controller;
  log: Logger;
  /** The network's fan-out (its peers drop the expired nodes). */
  poke(network: string): void;
  /** The node's stream, if open here, ends with this error. */
  end(network: string, node: string, error: { code: string; message: string }): void;
}

export class ExpiryClock {
  #timer: ReturnType<typeof setTimeout> | null = null;
  #at = Infinity;
  #running = false;
  #stopped = false;

  constructor(private readonly d: ExpiryClockDeps) {}

  /**
   * Looks for the earliest expiry and sleeps until then (a minute at most). `moved`: the one expiry
   * that changed (ms since the epoch), when known: one no earlier than the time already set needs no
   * look at every member (an enrolment's, 180 days out, is the common case: a look per enrolment
   * made enrolling N nodes O(N²), 8.5% of a 4,000-node enrolment's CPU).
   */
  arm(moved?: number): void {
    if (this.#stopped) return;
    if (moved !== undefined && this.#timer && moved >= this.#at) return;
    const next = this.d.controller.nextExpiry();
    const at = Math.min(next ?? Infinity, Date.now() + EXPIRY_LOOK_MS);
    if (this.#timer && at >= this.#at) return;
    if (this.#timer) clearTimeout(this.#timer);
    this.#at = at;
    // +1 ms: a timer may fire up to a millisecond before the wall clock says its time has come.
    this.#timer = setTimeout(() => void this.#fire(), Math.max(0, at - Date.now()) + 1);
    this.#timer.unref();
  }

  async #fire(): Promise<void> {
    this.#timer = null;
    this.#at = Infinity;
    if (this.#stopped || this.#running) return;
    this.#running = true;
    try {
      const { controller } = this.d;
      // A store across the network: one change after catching up (another replica may have recorded them already).
      const due = await controller.change(() => controller.expireDue());
      for (const { network, nodes, version } of due) {
        this.d.log.info({ network, nodes, stateVersion: version }, 'node credentials expired: out of their peers’ views');
        for (const node of nodes) {
          const at = controller.member(network, node)?.expiresAt ?? '';
          this.d.end(network, node, {
            code: 'MESHP_NODE_EXPIRED',
            message: `the credential of ${node} in ${network} expired at ${at}: an admin renews it (meshp node renew ${node})`,
          });
        }
        this.d.poke(network);
      }
    } catch (e) {
      this.d.log.warn({ err: oneLine(e) }, 'expiries not recorded: tried again at the next look');
    } finally {
      this.#running = false;
      this.arm();
    }
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }
}

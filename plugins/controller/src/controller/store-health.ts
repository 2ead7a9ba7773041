/**
 * Whether the controller's store takes writes (issue 24): up, or down since when and why. Every
 * store write the controller makes reports here (committed.ts for its records, the hosting's guard
 * for its tokens and credentials); /metrics shows it, and the hosting logs each change of state
 * once (an outage is one line when it starts and one when it ends, not one per refused write).
 */
import { isMeshpError } from '@meshp/core';
import { isStoreFault } from '../store-errors.js';

export interface StoreHealthView {
  up: boolean;
  /** ISO time the store went down (null: up). */
  downSince: string | null;
  /** The code of the last store error (null: none since start). */
  lastCode: string | null;
  lastError: string | null;
}

export class StoreHealth {
  #downSince: string | null = null;
  #lastCode: string | null = null;
  #lastError: string | null = null;
  /** Store errors since start, by code. */
  readonly errors = new Map<string, number>();
  /** Changes computed again because another controller committed first (the store's guard did not hold): a replica's contention. */
  recomputed = 0;
  /** Told when the store goes down (with the error) and when it is up again. */
  onChange: ((h: StoreHealthView) => void) | null = null;

  constructor(private readonly now: () => string = () => new Date().toISOString()) {}

  get up(): boolean {
    return this.#downSince === null;
  }

  view(): StoreHealthView {
    return { up: this.up, downSince: this.#downSince, lastCode: this.#lastCode, lastError: this.#lastError };
  }

  /** A write the store took: up (again). */
  ok(): void {
    if (this.#downSince === null) return;
    this.#downSince = null;
    this.onChange?.(this.view());
  }

  /** A store's error (already sorted by condition): counted, and the store is down from now if it was up. Answers the error. */
  failed<E>(e: E): E {
    const code = isMeshpError(e) ? e.code : 'MESHP_STORE_UNAVAILABLE';
    if (!isStoreFault(e) && isMeshpError(e)) return e;
    this.errors.set(code, (this.errors.get(code) ?? 0) + 1);
    this.#lastCode = code;
    this.#lastError = e instanceof Error ? e.message : String(e);
    if (this.#downSince === null) {
      this.#downSince = this.now();
      this.onChange?.(this.view());
    }
    return e;
  }
}

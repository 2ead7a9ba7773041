/**
 * Reconnect delays: exponential, capped, and jittered (each delay drawn between half and all of its
 * ceiling) so agents cut off together by a controller restart do not return together.
 */
export interface BackoffOptions {
  initialMs: number;
  maxMs: number;
  random?: () => number;
}

export class Backoff {
  #attempt = 0;
  readonly #o: Required<BackoffOptions>;

  constructor(options: BackoffOptions) {
    this.#o = { random: Math.random, ...options };
  }

  next(): number {
    const ceiling = Math.min(this.#o.maxMs, this.#o.initialMs * 2 ** this.#attempt);
    this.#attempt = Math.min(this.#attempt + 1, 30);
    return Math.round(ceiling / 2 + (this.#o.random() * ceiling) / 2);
  }

  reset(): void {
    this.#attempt = 0;
  }
}

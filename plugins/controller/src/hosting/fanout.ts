/**
 * The fan-out of changes to the Sync streams, off the call that made the change: an Enrol or an
 * admin call is answered first, and the streams are pumped in chunks, each followed by a turn of
 * the event loop (setImmediate), so calls, acks and HTTP/2 keepalive pings are answered while a
 * large fan-out runs. A stream already waiting is not queued twice: several changes that come
 * before its turn go out as one delta (the pump computes from what the node was last sent to the
 * network's version now).
 */

export interface Pumped {
  pump(): void;
}

export interface FanOutOptions {
  /** Streams pumped per turn of the event loop, at most. */
  chunk?: number;
  /** Time one turn may take (ms) before it yields, whatever the chunk. */
  sliceMs?: number;
}

export const DEFAULT_FANOUT: Required<FanOutOptions> = { chunk: 64, sliceMs: 8 };

export class FanOut {
  readonly #queue = new Set<Pumped>();
  readonly #o: Required<FanOutOptions>;
  #scheduled = false;
  #idle: (() => void)[] = [];
  /** Turns taken so far (each a chunk), for tests and the log. */
  turns = 0;

  constructor(options: FanOutOptions = {}) {
    this.#o = { ...DEFAULT_FANOUT, ...options };
  }

  get pending(): number {
    return this.#queue.size;
  }

  /** Queues the streams (each once, however many changes name it) and schedules a turn. */
  add(streams: Iterable<Pumped>): void {
    for (const s of streams) this.#queue.add(s);
    if (this.#queue.size > 0) this.#schedule();
  }

  /** Forgets a stream that ended. */
  drop(s: Pumped): void {
    this.#queue.delete(s);
  }

  /** Resolves when nothing is queued. */
  idle(): Promise<void> {
    if (this.#queue.size === 0 && !this.#scheduled) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => this.#turn());
  }

  #turn(): void {
    this.#scheduled = false;
    this.turns++;
    const until = performance.now() + this.#o.sliceMs;
    let n = 0;
    for (const s of this.#queue) {
      this.#queue.delete(s);
      s.pump();
      if (++n >= this.#o.chunk || performance.now() >= until) break;
    }
    if (this.#queue.size > 0) this.#schedule();
    else for (const f of this.#idle.splice(0)) f();
  }
}

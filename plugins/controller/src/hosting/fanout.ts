/**
 * The fan-out of changes to the Sync streams, off the call that made the change: an Enrol or an
 * admin call is answered first, and the streams are pumped in chunks, each followed by a turn of
 * the event loop (setImmediate), so calls, acks and HTTP/2 keepalive pings are answered while a
 * large fan-out runs. A stream already waiting is not queued twice: several changes that come
 * before its turn go out as one delta (the pump computes from what the node was last sent to the
 * network's version now). What each turn's pumps sent is tallied per network; when the queue is
 * empty the fan-out is over and its tally goes to `done` (the hub logs one line per network, issue 31).
 */

/** What one pump sent (nothing: undefined). */
export interface Sent {
  network: string;
  toVersion: number;
  snapshot: boolean;
}

export interface Pumped {
  pump(): Sent | undefined | void;
}

/** One network's share of a fan-out: how many agents were sent a delta (of those, snapshots), up to which version. */
export interface FanOutTally {
  network: string;
  agents: number;
  snapshots: number;
  version: number;
}

export interface FanOutOptions {
  /** Streams pumped per turn of the event loop, at most. */
  chunk?: number;
  /** Time one turn may take (ms) before it yields, whatever the chunk. */
  sliceMs?: number;
}

export type FanOutDone = (tallies: FanOutTally[]) => void;

export const DEFAULT_FANOUT: Required<FanOutOptions> = { chunk: 64, sliceMs: 8 };

export class FanOut {
  readonly #queue = new Set<Pumped>();
  readonly #o: Required<FanOutOptions>;
  readonly #done: FanOutDone;
  readonly #tally = new Map<string, FanOutTally>();
  #scheduled = false;
  #idle: (() => void)[] = [];
  /** Turns taken so far (each a chunk), for tests and the log. */
  turns = 0;

  constructor(options: FanOutOptions = {}, done: FanOutDone = () => undefined) {
    this.#o = { ...DEFAULT_FANOUT, ...options };
    this.#done = done;
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
      const sent = s.pump();
      if (sent) this.#count(sent);
      if (++n >= this.#o.chunk || performance.now() >= until) break;
    }
    if (this.#queue.size > 0) return this.#schedule();
    if (this.#tally.size > 0) {
      const tallies = [...this.#tally.values()];
      this.#tally.clear();
      this.#done(tallies);
    }
    for (const f of this.#idle.splice(0)) f();
  }

  #count(sent: Sent): void {
    const t = this.#tally.get(sent.network) ?? { network: sent.network, agents: 0, snapshots: 0, version: 0 };
    t.agents++;
    if (sent.snapshot) t.snapshots++;
    t.version = Math.max(t.version, sent.toVersion);
    this.#tally.set(sent.network, t);
  }
}

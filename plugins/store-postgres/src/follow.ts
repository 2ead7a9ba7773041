/**
 * How a replica learns of the others' changes: LISTEN on `meshp_change` (each commit that moved a
 * network's version notifies `<network>:<version>`), and a poll as a safety net for a notice lost
 * while the listening connection was down. Either way the store catches up (controller-store.ts),
 * which hands the changes to the controller; several notices before it runs are one catch-up.
 * While the database is down each poll fails the same way: a failure is told once, until the next
 * success (an outage is one line in the log, not one every poll).
 */
import pg from 'pg';
import { CHANNEL } from './controller-store.js';

export interface FollowOptions {
  /** The poll's period (ms). */
  pollMs?: number;
  /** Said when the listening connection or a catch-up failed (once, until one succeeds again; it is made again at the next poll). */
  onError?: (e: Error) => void;
}

export const DEFAULT_POLL_MS = 5_000;

export class Follower {
  readonly #url: string;
  readonly #catchUp: () => unknown;
  readonly #o: FollowOptions;
  #client: pg.Client | null = null;
  #scheduled = false;
  #closed = false;
  #timer: ReturnType<typeof setInterval> | null = null;
  /** Notices received (for tests). */
  notices = 0;
  /** A failure was told and nothing has succeeded since (the listen or a catch-up). */
  #failing = false;

  constructor(url: string, catchUp: () => unknown, options: FollowOptions = {}) {
    this.#url = url;
    this.#catchUp = catchUp;
    this.#o = options;
  }

  async start(): Promise<void> {
    await this.#listen();
    this.#timer = setInterval(() => {
      if (!this.#client) void this.#listen().catch((e: Error) => this.#fail(e));
      this.#schedule();
    }, this.#o.pollMs ?? DEFAULT_POLL_MS);
    this.#timer.unref();
  }

  async #listen(): Promise<void> {
    // keepAlive: a connection cut off by a partition is found dead by the kernel, then made again.
    const c = new pg.Client({ connectionString: this.#url, keepAlive: true, connectionTimeoutMillis: 5_000 });
    c.on('notification', (n) => {
      if (n.channel !== CHANNEL) return;
      this.notices++;
      this.#schedule();
    });
    c.on('error', (e) => {
      if (this.#client === c) this.#client = null;
      void c.end().catch(() => undefined);
      this.#fail(e);
    });
    await c.connect();
    await c.query(`LISTEN ${CHANNEL}`);
    if (this.#closed) return void (await c.end());
    this.#client = c;
    // Changes made while no one listened: caught up now.
    this.#schedule();
  }

  #schedule(): void {
    if (this.#scheduled || this.#closed) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      if (this.#closed) return;
      // Synchronous or not (a promise: the event loop runs on while it reads).
      void (async () => this.#catchUp())().then(
        () => {
          this.#failing = false;
        },
        (e: Error) => this.#fail(e),
      );
    });
  }

  /** Catches up now (the store's database answers again after an outage). */
  poke(): void {
    this.#schedule();
  }

  #fail(e: Error): void {
    if (this.#failing) return;
    this.#failing = true;
    this.#o.onError?.(e);
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) clearInterval(this.#timer);
    const c = this.#client;
    this.#client = null;
    await c?.end().catch(() => undefined);
  }
}

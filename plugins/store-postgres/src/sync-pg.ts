/**
 * PostgreSQL from the controller's thread, two ways. `runAsync` (the controller's changes, flushes
 * and reads through `transactionAsync`): the batch goes to a worker thread that runs it on its own
 * connection and answers by a message; the event loop runs on meanwhile. `run` (what is still
 * synchronous: the load at start, the hosting's reads at a hello or an enrolment): the same thread
 * runs it while this one waits on a shared flag (Atomics.wait). Either way a batch is one round trip
 * however many statements it holds, and the thread runs batches one after the other.
 *
 * A waited-for batch is the event loop standing still, so it is kept short and paid once per outage:
 * a batch with no answer within the call timeout (5 s, half the 10 s an agent's keepalive ping waits
 * for its answer: transport-grpc options.ts) fails, its thread is replaced (a late answer can then
 * never be taken for the next batch's), and the database counts as down. While it is down every
 * batch is refused at once (MESHP_STORE_UNAVAILABLE, no wait) and a probe runs in the background:
 * a message the thread answers asynchronously, never the shared flag. When the probe gets an answer
 * the database is up again and `onUp` is told (the follower catches up).
 */
import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { MeshpError } from '@meshp/core';
import { codeOf, connectionLost } from './sql-state.js';

export interface Stmt {
  text: string;
  values?: unknown[];
  /** A guard: the rows this statement must give (as JSON), else the batch is rolled back and answered stale (worker.ts). */
  expect?: Row[];
}

/** A batch asked without waiting (`SyncPg.runAsync`): answered on the thread's own channel, by id. */
export interface AsyncBatch {
  id: number;
  stmts: Stmt[];
  /** BEGIN … COMMIT in one batch: rolled back by the thread when a statement fails. */
  atomic: boolean;
}

/** The SQL state of a guard that did not hold: another controller committed first. */
export const STALE_STATE = 'MESHP_STALE';

export type Row = Record<string, unknown>;

export type Answer = { ok: true; results: { rows: Row[]; rowCount: number }[] } | { ok: false; failedAt: number; message: string; sqlState: string };

/** A probe's answer, on the worker's own channel (worker.on('message')). */
export interface ProbeAnswer {
  probe: number;
  ok: boolean;
  message?: string;
}

/** How long one batch may take before the database counts as gone (the longest the event loop waits on it). */
export const DEFAULT_CALL_TIMEOUT_MS = 5_000;
/** The probes while the database is down: the first after this, then twice as long each time, up to PROBE_MAX_MS. */
export const PROBE_FIRST_MS = 200;
export const PROBE_MAX_MS = 5_000;

/** What the store knows of its database: for the log, `/metrics` and admin answers. */
export interface StoreHealth {
  up: boolean;
  /** When the database was last found down (ms since the epoch), or null. */
  downSince: number | null;
  /** Why, as the failed batch said. */
  reason: string | null;
  /** Outages since the start (each a down then, maybe, an up). */
  outages: number;
}

/**
 * Blocks until the database thread has set the flag (its answer is on the port), or the time is up
 * (false). A wake alone is not an answer: the thread stores the flag, then notifies, and it may be
 * descheduled between the two, so its notify for one batch can come while this thread already waits
 * for the next one (seen under load: "woke with no answer"). The flag is what says so.
 */
export function waitForAnswer(flag: Int32Array, timeoutMs: number): boolean {
  const deadline = performance.now() + timeoutMs;
  while (Atomics.load(flag, 0) === 0) {
    const left = deadline - performance.now();
    if (left <= 0 || Atomics.wait(flag, 0, 0, left) === 'timed-out') return Atomics.load(flag, 0) !== 0;
  }
  return true;
}

/** One database thread: its batch port and the flag it sets. Replaced whole, never reused after a timeout. */
interface Thread {
  worker: Worker;
  port: MessagePort;
  flag: Int32Array;
  /** The batches asked without waiting, by id: settled by their answer, or refused when the thread is replaced. */
  pending: Map<number, Pending>;
}

interface Pending {
  stmts: Stmt[];
  resolve(results: { rows: Row[]; rowCount: number }[]): void;
  reject(e: Error): void;
  timer: ReturnType<typeof setTimeout>;
}

export class SyncPg {
  readonly #url: string;
  readonly #timeoutMs: number;
  #thread: Thread;
  #closed = false;
  #down: { since: number; reason: string } | null = null;
  #outages = 0;
  #probeDelay = PROBE_FIRST_MS;
  #probeTimer: ReturnType<typeof setTimeout> | null = null;
  /** The probe in flight (its number), and the timer that gives up on it. */
  #probeSeq = 0;
  #probeWait: ReturnType<typeof setTimeout> | null = null;
  /** Told once per outage, when the database is found down. */
  onDown: ((reason: string) => void) | null = null;
  /** Told when a probe reached the database again, with how long it was down (ms). */
  onUp: ((downMs: number) => void) | null = null;

  constructor(url: string, timeoutMs = DEFAULT_CALL_TIMEOUT_MS) {
    this.#url = url;
    this.#timeoutMs = timeoutMs;
    this.#thread = this.#spawn();
  }

  #spawn(): Thread {
    const { port1, port2 } = new MessageChannel();
    const flag = new Int32Array(new SharedArrayBuffer(4));
    // Plain JS: none of the parent's --import loaders (a test runner's) are needed there.
    const worker = new Worker(new URL('./worker.js', import.meta.url), {
      workerData: { url: this.#url, port: port2, flag, timeoutMs: this.#timeoutMs },
      transferList: [port2],
      execArgv: [],
    });
    worker.unref();
    const thread: Thread = { worker, port: port1, flag, pending: new Map() };
    worker.on('error', (e) => {
      if (this.#thread !== thread || this.#closed) return;
      this.#replace();
      this.#goDown(`the database thread failed: ${e.message}`);
    });
    worker.on('message', (m: ProbeAnswer | { id: number; answer: Answer }) => {
      if ('id' in m) this.#answered(thread, m.id, m.answer);
      else this.#probed(thread, m);
    });
    return thread;
  }

  /** Ends the current thread (its connection with it) and starts another: nothing it says later is read. */
  #replace(): void {
    const old = this.#thread;
    old.port.close();
    void old.worker.terminate();
    this.#thread = this.#spawn();
    // What it was asked and did not answer is refused: a late answer from it is never read.
    for (const [id, p] of old.pending) {
      clearTimeout(p.timer);
      old.pending.delete(id);
      p.reject(new MeshpError('MESHP_STORE_UNAVAILABLE', 'the database thread was replaced before it answered'));
    }
  }

  health(): StoreHealth {
    return { up: !this.#down, downSince: this.#down?.since ?? null, reason: this.#down?.reason ?? null, outages: this.#outages };
  }

  /**
   * Runs the statements in order; the rows of each. A failed statement throws (the ones before it
   * ran), coded by its condition (sql-state.ts). `timeoutMs`: a batch known to be long (the load at
   * start, a copy), run before anything is served.
   */
  run(stmts: Stmt[], timeoutMs = this.#timeoutMs): { rows: Row[]; rowCount: number }[] {
    this.#refuseWhileDown();
    const th = this.#thread;
    Atomics.store(th.flag, 0, 0);
    th.port.postMessage(stmts);
    if (!waitForAnswer(th.flag, timeoutMs)) {
      const reason = `no answer from the database within ${timeoutMs} ms`;
      this.#replace();
      this.#goDown(reason);
      throw new MeshpError('MESHP_STORE_UNAVAILABLE', reason);
    }
    const answer = receiveMessageOnPort(th.port)?.message as Answer | undefined;
    if (!answer) {
      this.#replace();
      this.#goDown('the database thread woke with no answer');
      throw new MeshpError('MESHP_STORE_UNAVAILABLE', 'the database thread woke with no answer');
    }
    return this.#results(stmts, answer);
  }

  /**
   * The same, without waiting: the event loop runs on while the database thread works (the batches
   * are run one after the other there, in the order asked, also those waited for). `atomic`: the
   * batch is one transaction (BEGIN … COMMIT), rolled back by the thread when a statement fails or
   * a guard does not hold (then the error's `stale` is true: another controller committed first).
   */
  runAsync(stmts: Stmt[], atomic = false, timeoutMs = this.#timeoutMs): Promise<{ rows: Row[]; rowCount: number }[]> {
    try {
      this.#refuseWhileDown();
    } catch (e) {
      return Promise.reject(e as Error);
    }
    const th = this.#thread;
    const id = ++this.#asked;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        if (!th.pending.delete(id)) return;
        const reason = `no answer from the database within ${timeoutMs} ms`;
        reject(new MeshpError('MESHP_STORE_UNAVAILABLE', reason));
        if (th === this.#thread) {
          this.#replace();
          this.#goDown(reason);
        }
      }, timeoutMs);
      timer.unref();
      th.pending.set(id, { stmts, resolve, reject, timer });
      th.port.postMessage({ id, stmts, atomic } satisfies AsyncBatch);
    });
  }

  #asked = 0;

  #answered(thread: Thread, id: number, answer: Answer): void {
    const p = thread.pending.get(id);
    if (!p) return;
    thread.pending.delete(id);
    clearTimeout(p.timer);
    try {
      p.resolve(this.#results(p.stmts, answer));
    } catch (e) {
      p.reject(e as Error);
    }
  }

  #refuseWhileDown(): void {
    if (this.#closed) throw new MeshpError('MESHP_STORE_UNAVAILABLE', 'the store is closed');
    if (this.#down) {
      throw new MeshpError(
        'MESHP_STORE_UNAVAILABLE',
        `the database is unreachable since ${new Date(this.#down.since).toISOString()} (${this.#down.reason}): refused at once, retried in the background`,
      );
    }
  }

  /** An answer's rows, or its failure thrown, coded by its condition (a guard that did not hold: `stale`). */
  #results(stmts: Stmt[], answer: Answer): { rows: Row[]; rowCount: number }[] {
    if (answer.ok) return answer.results;
    if (answer.sqlState === STALE_STATE) {
      const e = new MeshpError('MESHP_STORE_UNAVAILABLE', 'another controller committed first: the change is computed again');
      throw Object.assign(e, { stale: true });
    }
    if (connectionLost(answer.sqlState)) this.#goDown(answer.message);
    throw new MeshpError(
      codeOf(answer.sqlState),
      `${answer.message} (SQLSTATE ${answer.sqlState || 'none'}, in ${stmts[answer.failedAt]?.text.slice(0, 60) ?? '?'})`,
      {
        details: { sqlState: answer.sqlState },
      },
    );
  }

  /** The rows of one statement. */
  rows<T = Row>(text: string, values: unknown[] = []): T[] {
    return this.run([{ text, values }])[0]!.rows as T[];
  }

  #goDown(reason: string): void {
    if (this.#down || this.#closed) return;
    this.#down = { since: Date.now(), reason };
    this.#outages++;
    this.#probeDelay = PROBE_FIRST_MS;
    this.onDown?.(reason);
    this.#scheduleProbe();
  }

  #scheduleProbe(): void {
    if (this.#closed) return;
    this.#probeTimer = setTimeout(() => this.#probe(), this.#probeDelay);
    this.#probeTimer.unref();
    this.#probeDelay = Math.min(PROBE_MAX_MS, this.#probeDelay * 2);
  }

  /** Asks the thread to reach the database; the answer comes as a message (#probed), the event loop runs on. */
  #probe(): void {
    this.#probeTimer = null;
    if (this.#closed || !this.#down) return;
    const id = ++this.#probeSeq;
    this.#probeWait = setTimeout(() => {
      // No answer: the thread may hang on a dead connection. Another thread, another probe.
      if (this.#probeSeq !== id || this.#closed) return;
      this.#probeSeq++;
      this.#replace();
      this.#scheduleProbe();
    }, this.#timeoutMs);
    this.#probeWait.unref();
    this.#thread.worker.postMessage({ probe: id });
  }

  #probed(thread: Thread, m: ProbeAnswer): void {
    if (thread !== this.#thread || m.probe !== this.#probeSeq || !this.#down || this.#closed) return;
    if (this.#probeWait) clearTimeout(this.#probeWait);
    this.#probeWait = null;
    if (!m.ok) {
      this.#down.reason = m.message ?? this.#down.reason;
      this.#scheduleProbe();
      return;
    }
    const downMs = Date.now() - this.#down.since;
    this.#down = null;
    this.onUp?.(downMs);
  }

  close(): void {
    this.#closed = true;
    if (this.#probeTimer) clearTimeout(this.#probeTimer);
    if (this.#probeWait) clearTimeout(this.#probeWait);
    this.#thread.port.close();
    void this.#thread.worker.terminate();
  }
}

/** An error of a batch whose guard did not hold: another controller committed first, the change is computed again. */
export const isStale = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { stale?: unknown }).stale === true;

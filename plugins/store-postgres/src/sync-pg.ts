/**
 * PostgreSQL, synchronously: the controller's store seam is synchronous (its state is in memory and
 * every change is one store transaction, as with SQLite), so each batch of statements goes to a
 * worker thread that runs it on its own connection while this thread waits on a shared flag
 * (Atomics.wait). A batch is one round trip however many statements it holds: a store transaction
 * costs two (lock and catch up; write and commit).
 */
import { MessageChannel, Worker, receiveMessageOnPort, type MessagePort } from 'node:worker_threads';
import { MeshpError } from '@meshp/core';

export interface Stmt {
  text: string;
  values?: unknown[];
}

export type Row = Record<string, unknown>;

export type Answer = { ok: true; results: { rows: Row[]; rowCount: number }[] } | { ok: false; failedAt: number; message: string; sqlState: string };

/** How long one batch may take before the database counts as gone. */
export const DEFAULT_CALL_TIMEOUT_MS = 30_000;

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

export class SyncPg {
  readonly #worker: Worker;
  readonly #port: MessagePort;
  readonly #flag = new Int32Array(new SharedArrayBuffer(4));
  readonly #timeoutMs: number;
  #broken: string | null = null;

  constructor(url: string, timeoutMs = DEFAULT_CALL_TIMEOUT_MS) {
    const { port1, port2 } = new MessageChannel();
    // Plain JS: none of the parent's --import loaders (a test runner's) are needed there.
    this.#worker = new Worker(new URL('./worker.js', import.meta.url), {
      workerData: { url, port: port2, flag: this.#flag },
      transferList: [port2],
      execArgv: [],
    });
    this.#worker.unref();
    this.#worker.on('error', (e) => {
      this.#broken = `the database thread failed: ${e.message}`;
    });
    this.#port = port1;
    this.#timeoutMs = timeoutMs;
  }

  /** Runs the statements in order; the rows of each. A failed statement throws (the ones before it ran). */
  run(stmts: Stmt[]): { rows: Row[]; rowCount: number }[] {
    if (this.#broken) throw new MeshpError('MESHP_STORE_UNAVAILABLE', this.#broken);
    Atomics.store(this.#flag, 0, 0);
    this.#port.postMessage(stmts);
    if (!waitForAnswer(this.#flag, this.#timeoutMs)) {
      // An answer that comes later would be taken for the next batch's: this connection is not used again.
      this.#broken = `no answer from the database within ${this.#timeoutMs} ms`;
      throw new MeshpError('MESHP_STORE_UNAVAILABLE', this.#broken);
    }
    const answer = receiveMessageOnPort(this.#port)?.message as Answer | undefined;
    if (!answer) throw new MeshpError('MESHP_STORE_UNAVAILABLE', 'the database thread woke with no answer');
    if (!answer.ok) {
      const code = /^(08|57P)/.test(answer.sqlState) || answer.sqlState === '' ? 'MESHP_STORE_UNAVAILABLE' : 'MESHP_STATE_CORRUPT';
      throw new MeshpError(code, `${answer.message} (SQLSTATE ${answer.sqlState || 'none'}, in ${stmts[answer.failedAt]?.text.slice(0, 60) ?? '?'})`);
    }
    return answer.results;
  }

  /** The rows of one statement. */
  rows<T = Row>(text: string, values: unknown[] = []): T[] {
    return this.run([{ text, values }])[0]!.rows as T[];
  }

  close(): void {
    this.#broken = 'the store is closed';
    this.#port.close();
    void this.#worker.terminate();
  }
}

/**
 * The thread that talks to PostgreSQL for `SyncPg` (sync-pg.ts): it runs each batch of statements
 * the controller's thread sends, one batch after the other on one connection (never two at once: a
 * batch is a transaction of its own), and answers it: a batch waited for (an array) by setting the
 * shared flag with the answer on the port; a batch asked without waiting (`{ id, stmts }`) by a
 * message on the thread's own channel. A connection that failed is made again for the next batch.
 * An atomic batch (BEGIN … COMMIT in one) is rolled back here when a statement fails or a guard
 * (`expect`: the rows a statement must give, else another controller committed first) does not
 * hold. A probe (while the database counts as down) comes on the thread's own channel and is
 * answered there, as a message.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import pg from 'pg';
import type { Answer, AsyncBatch, ProbeAnswer, Stmt } from './sync-pg.js';

/** The SQL state an unmet guard is answered with (not one PostgreSQL uses). */
const STALE = 'MESHP_STALE';

const { url, port, flag, timeoutMs } = workerData as { url: string; port: MessagePort; flag: Int32Array; timeoutMs: number };
let client: pg.Client | null = null;

async function connected(): Promise<pg.Client> {
  if (client) return client;
  const c = new pg.Client({
    connectionString: url,
    connectionTimeoutMillis: timeoutMs,
    keepAlive: true,
    // The server gives up before the controller's thread does, with a code that says why (57014,
    // 55P03: the store's lock held elsewhere): the connection is then still good.
    statement_timeout: Math.max(100, timeoutMs - 1_000),
    lock_timeout: Math.max(100, timeoutMs - 1_000),
    // A transaction left open by a replica that lost its connection (a partition) holds the store's
    // lock: the server ends it, the others go on.
    idle_in_transaction_session_timeout: timeoutMs * 3,
  });
  c.on('error', () => {
    if (client === c) client = null;
  });
  await c.connect();
  client = c;
  return c;
}

/** A failure of the connection, not of a statement: drop it, the next batch connects again (an open transaction died with it). */
function dropIfBroken(err: Error & { code?: string }): void {
  if (!err.code || /^(E[A-Z0-9]+$|08|57P)/.test(err.code)) {
    void client?.end().catch(() => undefined);
    client = null;
  }
}

async function rollback(c: pg.Client | null): Promise<void> {
  try {
    await c?.query('ROLLBACK');
  } catch {
    // The connection is gone with its transaction: nothing to roll back.
  }
}

async function run(stmts: Stmt[], atomic = false): Promise<Answer> {
  const results: { rows: Record<string, unknown>[]; rowCount: number }[] = [];
  let c: pg.Client | null = null;
  try {
    c = await connected();
    for (const s of stmts) {
      const r = await c.query(s.text, s.values ?? []);
      if (s.expect !== undefined && JSON.stringify(r.rows) !== JSON.stringify(s.expect)) {
        await rollback(c);
        return { ok: false, failedAt: results.length, message: 'another controller committed first', sqlState: STALE };
      }
      results.push({ rows: r.rows as Record<string, unknown>[], rowCount: r.rowCount ?? 0 });
    }
    return { ok: true, results };
  } catch (e) {
    const err = e as Error & { code?: string };
    if (atomic) await rollback(client);
    dropIfBroken(err);
    return { ok: false, failedAt: results.length, message: err.message, sqlState: err.code ?? '' };
  }
}

/** One batch after the other: the next starts when the one before has its answer. */
let queue: Promise<unknown> = Promise.resolve();
const inTurn = (f: () => Promise<void>): void => {
  queue = queue.then(f, f);
};

port.on('message', (m: Stmt[] | AsyncBatch) => {
  if (Array.isArray(m)) {
    inTurn(async () => {
      const answer = await run(m);
      port.postMessage(answer);
      Atomics.store(flag, 0, 1);
      Atomics.notify(flag, 0);
    });
    return;
  }
  inTurn(async () => parentPort!.postMessage({ id: m.id, answer: await run(m.stmts, m.atomic) }));
});

parentPort!.on('message', (m: { probe: number }) => {
  void (async (): Promise<ProbeAnswer> => {
    try {
      await (await connected()).query('SELECT 1');
      return { probe: m.probe, ok: true };
    } catch (e) {
      dropIfBroken(e as Error & { code?: string });
      return { probe: m.probe, ok: false, message: (e as Error).message };
    }
  })().then((a) => parentPort!.postMessage(a));
});

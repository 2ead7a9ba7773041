/**
 * The thread that talks to PostgreSQL for `SyncPg` (sync-pg.ts): it runs each batch of statements
 * the controller's thread sends, in order on one connection, and wakes that thread when the answer
 * is on the port. A connection that failed is made again for the next batch. A probe (while the
 * database counts as down) comes on the thread's own channel and is answered there, as a message:
 * the controller's thread does not wait for it.
 */
import { parentPort, workerData, type MessagePort } from 'node:worker_threads';
import pg from 'pg';
import type { Answer, ProbeAnswer, Stmt } from './sync-pg.js';

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

async function run(stmts: Stmt[]): Promise<Answer> {
  const results: { rows: Record<string, unknown>[]; rowCount: number }[] = [];
  try {
    const c = await connected();
    for (const s of stmts) {
      const r = await c.query(s.text, s.values ?? []);
      results.push({ rows: r.rows as Record<string, unknown>[], rowCount: r.rowCount ?? 0 });
    }
    return { ok: true, results };
  } catch (e) {
    const err = e as Error & { code?: string };
    dropIfBroken(err);
    return { ok: false, failedAt: results.length, message: err.message, sqlState: err.code ?? '' };
  }
}

port.on('message', (stmts: Stmt[]) => {
  void run(stmts).then((answer) => {
    port.postMessage(answer);
    Atomics.store(flag, 0, 1);
    Atomics.notify(flag, 0);
  });
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

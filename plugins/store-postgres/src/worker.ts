/**
 * The thread that talks to PostgreSQL for `SyncPg` (sync-pg.ts): it runs each batch of statements
 * the controller's thread sends, in order on one connection, and wakes that thread when the answer
 * is on the port. A connection that failed is made again for the next batch.
 */
import { workerData, type MessagePort } from 'node:worker_threads';
import pg from 'pg';
import type { Answer, Stmt } from './sync-pg.js';

const { url, port, flag } = workerData as { url: string; port: MessagePort; flag: Int32Array };
let client: pg.Client | null = null;

async function connected(): Promise<pg.Client> {
  if (client) return client;
  const c = new pg.Client({ connectionString: url });
  c.on('error', () => {
    if (client === c) client = null;
  });
  await c.connect();
  client = c;
  return c;
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
    // A broken connection is dropped: the next batch connects again (an open transaction died with it).
    if (!err.code || /^(08|57P)/.test(err.code)) {
      void client?.end().catch(() => undefined);
      client = null;
    }
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

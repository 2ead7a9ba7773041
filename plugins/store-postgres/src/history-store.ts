/**
 * The web console's convergence history in PostgreSQL (issue 30; migration 9): one row per network
 * per sample, trimmed by the console's window at each write. Read once at a replica's start; written
 * without the controller's thread waiting (runAsync). Replicas that share the database each add the
 * samples they take (a replica sees the gaps every node's replica wrote), so the chart a replica
 * draws after a restart is every replica's samples of the window.
 */
import type { SyncPg } from './sync-pg.js';

/** As @meshp/controller's HistoryRow (console/history.ts), which this package does not import. */
export interface HistoryRow {
  network: string;
  at: number;
  gaps: Record<string, number>;
}

export class PostgresHistoryStore {
  readonly #db: SyncPg;

  constructor(db: SyncPg) {
    this.#db = db;
  }

  loadHistory(since: number): HistoryRow[] {
    return this.#db
      .rows<{ network: string; at: string | number; gaps: Record<string, number> }>(
        'SELECT network, at, gaps FROM console_history WHERE at >= $1 ORDER BY at',
        [since],
      )
      .map((r) => ({ network: r.network, at: Number(r.at), gaps: r.gaps }));
  }

  async appendHistory(rows: readonly HistoryRow[], trimBefore: number): Promise<void> {
    await this.#db.runAsync(
      [
        { text: 'DELETE FROM console_history WHERE at < $1', values: [trimBefore] },
        ...rows.map((r) => ({
          text: 'INSERT INTO console_history (network, at, gaps) VALUES ($1, $2, $3) ON CONFLICT (network, at) DO UPDATE SET gaps = EXCLUDED.gaps',
          values: [r.network, r.at, JSON.stringify(r.gaps)],
        })),
      ],
      true,
    );
  }

  /** The connection is the controller store's: closed with it. */
  close(): void {}
}

/**
 * The console's convergence history in the state folder's SQLite file: its own table and connection
 * (WAL: it waits on no transaction of the controller's), one row per network per sample, trimmed by
 * the window at each write (history.ts). PostgreSQL: store-postgres history-store.ts (migration 9).
 */
import type Database from 'better-sqlite3';
import { classified } from '../store-errors.js';
import { openSqliteTables } from '../hosting/sqlite-open.js';
import type { HistoryBook, HistoryRow } from './history.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS console_history (network TEXT NOT NULL, at INTEGER NOT NULL, gaps TEXT NOT NULL, PRIMARY KEY (network, at));
`;

export class SqliteHistoryStore implements HistoryBook {
  readonly #db: Database.Database;
  readonly #path: string;

  constructor(path: string) {
    this.#path = path;
    this.#db = openSqliteTables(path, SCHEMA);
  }

  loadHistory(since: number): HistoryRow[] {
    const rows = classified(
      this.#path,
      () =>
        this.#db.prepare('SELECT network, at, gaps FROM console_history WHERE at >= ? ORDER BY at').all(since) as {
          network: string;
          at: number;
          gaps: string;
        }[],
    );
    return rows.map((r) => ({ network: r.network, at: Number(r.at), gaps: JSON.parse(r.gaps) as Record<string, number> }));
  }

  appendHistory(rows: readonly HistoryRow[], trimBefore: number): void {
    if (!this.#db.open) return;
    const insert = this.#db.prepare('INSERT OR REPLACE INTO console_history (network, at, gaps) VALUES (?, ?, ?)');
    const trim = this.#db.prepare('DELETE FROM console_history WHERE at < ?');
    classified(this.#path, () =>
      this.#db.transaction(() => {
        trim.run(trimBefore);
        for (const r of rows) insert.run(r.network, r.at, JSON.stringify(r.gaps));
      })(),
    );
  }

  close(): void {
    if (this.#db.open) this.#db.close();
  }
}

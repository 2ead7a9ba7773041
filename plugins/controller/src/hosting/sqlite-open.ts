/** A table of the hosting's own in the state folder's SQLite file: its own connection (WAL, a 5 s busy wait), its schema made; errors sorted by condition. */
import Database from 'better-sqlite3';
import { storeError } from '../store-errors.js';

export function openSqliteTables(path: string, schema: string): Database.Database {
  try {
    const db = new Database(path);
    db.pragma('journal_mode = WAL');
    db.pragma('busy_timeout = 5000');
    db.exec(schema);
    return db;
  } catch (cause) {
    throw storeError(cause, path);
  }
}

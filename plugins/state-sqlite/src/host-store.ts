/**
 * The host's records in one SQLite file. WAL with synchronous=FULL: a call that returns has
 * committed durably, so an original recorded is there after a kill -9 at any later point. A call
 * that fails was rolled back (each write is one statement or one transaction), so what was recorded
 * before it is as it was, and it throws by its condition (store-errors.ts), naming the file.
 */
import type Database from 'better-sqlite3';
import { join } from 'node:path';
import {
  type HostReport,
  type HostStateStore,
  type IntentRecord,
  type OriginalRecord,
  type OwnedRecord,
  type Peer,
  type ResourceKind,
  type StateDelta,
  type ViewWrite,
  type StoredReport,
} from '@meshp/core';
import { privateDbFiles, privateDir, sayTightened } from '@meshp/state-files';
import { openHostDb } from './open.js';
import { storeError } from './store-errors.js';

const KEEP_REPORTS = 20;

type ViewQueries = Record<
  'clearPeers' | 'clearComponents' | 'delPeer' | 'putPeer' | 'delComponent' | 'putComponent' | 'delValue' | 'putValue',
  Database.Statement
>;

/** The row that says a view is kept per peer, and at which version. */
const VIEW_META = 'agent.view.meta';

interface OriginalRow {
  key: string;
  kind: string;
  module: string;
  original: Buffer;
  fingerprint: string;
  found_at: string;
  last_fingerprint: string | null;
  changed_at: string | null;
  identity: string | null;
  meta: string | null;
}

interface OwnedRow extends Omit<OwnedRecord, 'made'> {
  made: number | null;
}

function toOwned(r: OwnedRow): OwnedRecord {
  return { ...r, made: r.made === null ? null : r.made === 1 };
}

const OWNED_COLUMNS = 'key, kind, module, digest, at, identity, made';

function toOriginal(r: OriginalRow): OriginalRecord {
  return {
    key: r.key,
    kind: r.kind as ResourceKind,
    module: r.module,
    original: new Uint8Array(r.original),
    fingerprint: r.fingerprint,
    foundAt: r.found_at,
    lastFingerprint: r.last_fingerprint,
    changedAt: r.changed_at,
    identity: r.identity,
    meta: r.meta === null ? null : (JSON.parse(r.meta) as OriginalRecord['meta']),
  };
}

export class SqliteHostStore implements HostStateStore {
  readonly file: string;
  /** What was found too wide and tightened when the store was opened (also said on stderr). */
  readonly tightened: string[] = [];
  readonly #db: Database.Database;

  /** Refuses a damaged file (quick_check), a full disk and a file in use, each by its code (open.ts). */
  constructor(stateDir: string) {
    this.file = join(stateDir, 'host.db');
    let db: Database.Database | undefined;
    try {
      // host.db holds the agent's credential and the originals of held files (a found private key).
      const said: (string | null)[] = [privateDir(stateDir)];
      said.push(...privateDbFiles(this.file));
      db = openHostDb(this.file);
      said.push(...privateDbFiles(this.file));
      this.tightened = said.filter((l): l is string => l !== null);
    } catch (e) {
      db?.close();
      throw storeError(e, this.file, 'opening it');
    }
    this.#db = db;
    sayTightened(this.tightened);
  }

  /** One call of the store: what SQLite throws is said by its condition, with what was being done. */
  #do<T>(doing: string, fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      throw storeError(e, this.file, doing);
    }
  }

  async getOwned(key: string): Promise<OwnedRecord | null> {
    return this.#do(`reading the owned record of ${key}`, () => {
      const row = this.#db.prepare(`SELECT ${OWNED_COLUMNS} FROM owned WHERE key = ?`).get(key) as OwnedRow | undefined;
      return row ? toOwned(row) : null;
    });
  }

  async listOwned(): Promise<OwnedRecord[]> {
    return this.#do('reading the owned records', () => (this.#db.prepare(`SELECT ${OWNED_COLUMNS} FROM owned ORDER BY key`).all() as OwnedRow[]).map(toOwned));
  }

  async getOriginal(key: string): Promise<OriginalRecord | null> {
    return this.#do(`reading the original of ${key}`, () => {
      const row = this.#db.prepare('SELECT * FROM originals WHERE key = ?').get(key) as OriginalRow | undefined;
      return row ? toOriginal(row) : null;
    });
  }

  async listOriginals(): Promise<OriginalRecord[]> {
    return this.#do('reading the originals', () => (this.#db.prepare('SELECT * FROM originals ORDER BY key').all() as OriginalRow[]).map(toOriginal));
  }

  async listIntents(): Promise<IntentRecord[]> {
    return this.#do('reading the intents', () => this.#db.prepare('SELECT key, kind, module, digest, at FROM intents ORDER BY key').all() as IntentRecord[]);
  }

  /** The first original recorded for a key is the one kept: a later sighting never overwrites it. */
  async recordOriginal(rec: OriginalRecord): Promise<void> {
    this.#do(`recording the original of ${rec.key}`, () =>
      this.#db
        .prepare(
          `INSERT INTO originals (key, kind, module, original, fingerprint, found_at, last_fingerprint, changed_at, identity, meta)
         VALUES (@key, @kind, @module, @original, @fingerprint, @foundAt, @lastFingerprint, @changedAt, @identity, @meta)
         ON CONFLICT(key) DO NOTHING`,
        )
        .run({ ...rec, original: Buffer.from(rec.original), identity: rec.identity ?? null, meta: rec.meta ? JSON.stringify(rec.meta) : null }),
    );
  }

  async noteSeen(key: string, fingerprint: string | null, at: string, identity?: string | null): Promise<void> {
    this.#do(`noting what was seen of ${key}`, () =>
      this.#db
        .prepare(
          `UPDATE originals SET last_fingerprint = @fingerprint,
           changed_at = CASE WHEN changed_at IS NULL AND (@fingerprint IS NULL OR @fingerprint != fingerprint) THEN @at ELSE changed_at END,
           identity = CASE WHEN @identity IS NULL THEN identity ELSE @identity END
         WHERE key = @key`,
        )
        .run({ key, fingerprint, at, identity: identity ?? null }),
    );
  }

  async recordIntent(rec: IntentRecord): Promise<void> {
    this.#do(`recording the intent to write ${rec.key}`, () =>
      this.#db
        .prepare(
          'INSERT INTO intents (key, kind, module, digest, at) VALUES (@key, @kind, @module, @digest, @at) ON CONFLICT(key) DO UPDATE SET digest = @digest, at = @at, module = @module',
        )
        .run(rec),
    );
  }

  async recordOwned(rec: OwnedRecord): Promise<void> {
    this.#do(`recording ${rec.key} as the host's own`, () =>
      this.#db.transaction(() => {
        this.#db
          .prepare(
            `INSERT INTO owned (key, kind, module, digest, at, identity, made) VALUES (@key, @kind, @module, @digest, @at, @identity, @made)
           ON CONFLICT(key) DO UPDATE SET digest = @digest, at = @at, module = @module, identity = @identity, made = COALESCE(@made, made)`,
          )
          .run({ ...rec, identity: rec.identity ?? null, made: rec.made === undefined || rec.made === null ? null : rec.made ? 1 : 0 });
        this.#db.prepare('DELETE FROM intents WHERE key = ?').run(rec.key);
      })(),
    );
  }

  async refound(key: string, fingerprint: string, identity: string | null): Promise<void> {
    this.#do(`recording ${key} as held again`, () =>
      this.#db.transaction(() => {
        this.#db
          .prepare(
            `UPDATE originals SET fingerprint = @fingerprint, last_fingerprint = @fingerprint, changed_at = NULL,
             identity = CASE WHEN @identity IS NULL THEN identity ELSE @identity END WHERE key = @key`,
          )
          .run({ key, fingerprint, identity });
        this.#db.prepare('DELETE FROM owned WHERE key = ?').run(key);
        this.#db.prepare('DELETE FROM intents WHERE key = ?').run(key);
      })(),
    );
  }

  async clearIntent(key: string): Promise<void> {
    this.#do(`clearing the intent for ${key}`, () => this.#db.prepare('DELETE FROM intents WHERE key = ?').run(key));
  }

  async forgetOwned(key: string): Promise<void> {
    this.#do(`forgetting ${key}`, () =>
      this.#db.transaction(() => {
        this.#db.prepare('DELETE FROM owned WHERE key = ?').run(key);
        this.#db.prepare('DELETE FROM intents WHERE key = ?').run(key);
      })(),
    );
  }

  async getValue<T>(name: string): Promise<T | null> {
    return this.#do(`reading ${name}`, () => {
      const row = this.#db.prepare('SELECT value FROM kv WHERE name = ?').get(name) as { value: string } | undefined;
      return row ? (JSON.parse(row.value) as T) : null;
    });
  }

  async setValue(name: string, value: unknown): Promise<void> {
    this.#do(`writing ${name}`, () => {
      if (value === null || value === undefined) this.#db.prepare('DELETE FROM kv WHERE name = ?').run(name);
      else
        this.#db.prepare('INSERT INTO kv (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value').run(name, JSON.stringify(value));
    });
  }

  async saveReport(report: HostReport): Promise<void> {
    this.#do('saving the report', () =>
      this.#db.transaction(() => {
        this.#db.prepare('INSERT INTO reports (at, report) VALUES (?, ?)').run(report.at, JSON.stringify(report));
        this.#db.prepare('DELETE FROM reports WHERE id <= (SELECT MAX(id) FROM reports) - ?').run(KEEP_REPORTS);
      })(),
    );
  }

  async lastReports(n: number): Promise<StoredReport[]> {
    return this.#do('reading the last reports', () => {
      const rows = this.#db.prepare('SELECT at, report FROM reports ORDER BY id DESC LIMIT ?').all(n) as { at: string; report: string }[];
      return rows.map((r) => ({ at: r.at, report: JSON.parse(r.report) as HostReport }));
    });
  }

  #viewQ: ViewQueries | null = null;

  #view(): ViewQueries {
    this.#viewQ ??= {
      clearPeers: this.#db.prepare('DELETE FROM view_peers'),
      clearComponents: this.#db.prepare('DELETE FROM view_components'),
      delPeer: this.#db.prepare('DELETE FROM view_peers WHERE id = ?'),
      putPeer: this.#db.prepare('INSERT INTO view_peers (id, doc) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET doc = excluded.doc'),
      delComponent: this.#db.prepare('DELETE FROM view_components WHERE name = ?'),
      putComponent: this.#db.prepare('INSERT INTO view_components (name, doc) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET doc = excluded.doc'),
      delValue: this.#db.prepare('DELETE FROM kv WHERE name = ?'),
      putValue: this.#db.prepare('INSERT INTO kv (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = excluded.value'),
    };
    return this.#viewQ;
  }

  /** What a delta changed in the agent's view, with the records written beside it, in one durable transaction. */
  async saveView(w: ViewWrite): Promise<void> {
    this.#do(`saving the view at version ${w.version}`, () => {
      const q = this.#view();
      this.#db.transaction(() => {
        if (w.full) {
          q.clearPeers.run();
          q.clearComponents.run();
        }
        for (const id of w.remove) q.delPeer.run(id);
        for (const p of w.upsert) q.putPeer.run(p.id, JSON.stringify(p));
        for (const [name, v] of Object.entries(w.components)) {
          if (v === null || v === undefined) q.delComponent.run(name);
          else q.putComponent.run(name, JSON.stringify(v));
        }
        q.putValue.run(VIEW_META, JSON.stringify({ network: w.network, version: w.version }));
        for (const [name, v] of Object.entries(w.values)) {
          if (v === null || v === undefined) q.delValue.run(name);
          else q.putValue.run(name, JSON.stringify(v));
        }
      })();
    });
  }

  async loadView(): Promise<StateDelta | null> {
    const meta = await this.getValue<{ network: string; version: number }>(VIEW_META);
    if (!meta) return null;
    return this.#do('reading the view', () => {
      const peers = (this.#db.prepare('SELECT doc FROM view_peers ORDER BY id').all() as { doc: string }[]).map((r) => JSON.parse(r.doc) as Peer);
      const out: StateDelta = { fromVersion: 0, toVersion: meta.version, upsertPeers: peers, removePeers: [], network: meta.network };
      for (const r of this.#db.prepare('SELECT name, doc FROM view_components').all() as { name: string; doc: string }[])
        Object.assign(out, { [r.name]: JSON.parse(r.doc) as unknown });
      return out;
    });
  }

  async close(): Promise<void> {
    if (this.#db.open) this.#db.close();
  }
}

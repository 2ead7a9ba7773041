/**
 * The controller's state in PostgreSQL, shared by several `meshp controller serve` replicas. Each
 * keeps the whole state in memory, as with SQLite; every store transaction is one PostgreSQL
 * transaction that first takes the store's advisory lock and catches up with what the others
 * committed (so this replica's next version follows theirs: two never hand out the same one), then
 * writes, notifies `meshp_change` with `<network>:<version>` and commits. The others LISTEN
 * (follow.ts) and catch up at once; a poll catches what a lost notice missed.
 */
import type { AuditEntry, ControllerStore, RemoteChange, StoredState, TokenRecord } from '@meshp/core';
import { syncFromRow, syncToRow, type LogEntry, type MemberRecord, type NetworkRecord, type SyncRecord } from '@meshp/core/delta';
import { isMeshpError } from '@meshp/core';
import type { Row, Stmt, SyncPg } from './sync-pg.js';

/** The sync record's columns (migration 10, ADR 0044: core sync-row.ts), the document last. */
const SYNC_COLUMNS = 'applied, applied_hash, sent, basis, target, snapshot_pending, expectations, doc';
const SYNC_READ = SYNC_COLUMNS;

/** The advisory lock every store transaction takes (an arbitrary constant of meshp's). */
export const STORE_LOCK = 0x6d657369;
export const CHANNEL = 'meshp_change';
/** The load at start reads the whole state in one batch, before anything is served: it may take longer than a change. */
export const LOAD_TIMEOUT_MS = 120_000;

export class PostgresControllerStore implements ControllerStore {
  readonly #db: SyncPg;
  /** Statements of the open transaction; null outside one. */
  #ops: Stmt[] | null = null;
  /** Networks whose record this transaction put, with the version put. */
  #put = new Map<string, number>();
  #depth = 0;
  /** Networks this transaction removed. */
  #gone = new Set<string>();
  /** The version of each network this replica's memory holds (all committed). */
  readonly #known = new Map<string, number>();
  #apply: ((c: RemoteChange) => void) | null = null;
  /** Transactions committed, and catch-ups that found another replica's changes (for tests and the bench). */
  readonly counts = { transactions: 0, caughtUp: 0 };
  constructor(db: SyncPg) {
    this.#db = db;
  }

  load(): StoredState {
    const [networks, members, log, sync, tokens] = this.#db
      .run(
        [
          { text: 'BEGIN ISOLATION LEVEL REPEATABLE READ' },
          { text: `SET LOCAL statement_timeout = ${LOAD_TIMEOUT_MS}` },
          { text: 'SELECT doc FROM networks' },
          { text: 'SELECT network, doc FROM members' },
          { text: 'SELECT network, doc FROM log ORDER BY network, version' },
          { text: `SELECT network, id, ${SYNC_READ} FROM sync` },
          { text: 'SELECT doc FROM tokens' },
          { text: 'COMMIT' },
        ],
        LOAD_TIMEOUT_MS,
      )
      .slice(2, 7)
      .map((r) => r.rows);
    const state: StoredState = {
      networks: networks!.map((r) => r.doc as NetworkRecord),
      members: members!.map((r) => ({ network: r.network as string, member: r.doc as MemberRecord })),
      log: log!.map((r) => ({ network: r.network as string, entry: r.doc as LogEntry })),
      sync: sync!.map((r) => ({ network: r.network as string, id: r.id as string, sync: syncFromRow(r) })),
      tokens: tokens!.map((r) => r.doc as TokenRecord),
    };
    for (const n of state.networks) this.#known.set(n.name, n.version);
    return state;
  }

  follow(apply: (c: RemoteChange) => void): void {
    this.#apply = apply;
  }

  /** Reads what other replicas committed and hands it to the controller (outside a transaction: in one of its own). */
  catchUp(): number {
    if (this.#depth > 0) return 0;
    try {
      const n = this.#catchUpLocked();
      this.#db.run([{ text: 'COMMIT' }]);
      return n;
    } catch (e) {
      this.#rollback();
      throw e;
    }
  }

  /**
   * Catches up before an admin call or an enrolment, when the database answers: while it is down
   * (or found down by this very call) the memory stays as it is, so a read answers from it (what
   * this replica last knew of the others) and a change is refused by its own transaction, at once.
   */
  freshen(): void {
    try {
      this.catchUp();
    } catch (e) {
      if (!isMeshpError(e, 'MESHP_STORE_UNAVAILABLE')) throw e;
    }
  }

  transaction(fn: () => void): void {
    if (this.#depth > 0) {
      this.#depth++;
      try {
        fn();
      } finally {
        this.#depth--;
      }
      return;
    }
    this.#depth = 1;
    this.#ops = [];
    this.#put.clear();
    try {
      this.#catchUpLocked();
      fn();
      const notices: Stmt[] = [];
      for (const [name, version] of this.#put) {
        if (version > (this.#known.get(name) ?? -1)) notices.push({ text: 'SELECT pg_notify($1, $2)', values: [CHANNEL, `${name}:${version}`] });
      }
      // A failure here (the writes refused, the answer lost) throws to the controller, which puts its
      // memory back as committed (its image). #known stays where it was: a commit whose answer was
      // lost but that did commit is found at the next catch-up, and applied as another replica's change.
      this.#db.run([...this.#ops, ...notices, { text: 'COMMIT' }]);
      for (const [name, version] of this.#put) this.#known.set(name, version);
      for (const name of this.#gone) this.#known.delete(name);
      this.counts.transactions++;
    } catch (e) {
      this.#rollback();
      throw e;
    } finally {
      this.#depth = 0;
      this.#ops = null;
      this.#put.clear();
      this.#gone.clear();
    }
  }

  /**
   * The controller's change without waiting on the database (the event loop runs on): what the
   * others committed is read and applied first, then `fn` runs (the controller's change, against
   * memory, its writes collected), then one batch takes the store's lock, checks that no other
   * controller committed since the read (a guard on every network's version), writes, notifies and
   * commits. A guard that does not hold rolls the batch back and throws a `stale` error: the caller
   * puts its memory back and runs the change again on what is there now (committed.ts).
   */
  async transactionAsync(fn: () => void): Promise<void> {
    // While the database is down, memory stays as it is: a read answers from it, a change is refused by its commit, at once.
    await this.catchUpAsync().catch((e: unknown) => {
      if (!isMeshpError(e, 'MESHP_STORE_UNAVAILABLE')) throw e;
    });
    if (this.#depth > 0) throw new Error('transactionAsync inside a transaction');
    this.#depth = 1;
    this.#ops = [];
    this.#put.clear();
    this.#gone.clear();
    let ops: Stmt[];
    let put: Map<string, number>;
    let gone: Set<string>;
    try {
      fn();
    } finally {
      ops = this.#ops;
      put = new Map(this.#put);
      gone = new Set(this.#gone);
      this.#depth = 0;
      this.#ops = null;
      this.#put.clear();
      this.#gone.clear();
    }
    if (ops.length === 0) return;
    const known = [...this.#known].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([name, version]) => ({ name, version }));
    const notices = [...put]
      .filter(([name, v]) => v > (this.#known.get(name) ?? -1))
      .map(([name, v]) => ({ text: 'SELECT pg_notify($1, $2)', values: [CHANNEL, `${name}:${v}`] }));
    await this.#db.runAsync(
      [
        { text: 'BEGIN' },
        { text: 'SELECT pg_advisory_xact_lock($1)', values: [STORE_LOCK] },
        { text: 'SELECT name, version FROM networks ORDER BY name COLLATE "C"', expect: known },
        ...ops,
        ...notices,
        { text: 'COMMIT' },
      ],
      true,
    );
    for (const [name, version] of put) this.#known.set(name, version);
    for (const name of gone) this.#known.delete(name);
    this.counts.transactions++;
  }

  /** What the other controllers committed, read without waiting (one consistent snapshot per network) and applied; how many networks changed. */
  async catchUpAsync(): Promise<number> {
    const [versions] = await this.#db.runAsync([{ text: 'SELECT name, version FROM networks' }]);
    const there = new Map(versions!.rows.map((r) => [r.name as string, r.version as number]));
    const changes: RemoteChange[] = [];
    for (const [name, version] of there) {
      const known = this.#known.get(name);
      if (known !== undefined && known >= version) continue;
      const [, rec, log, m] = await this.#db.runAsync(
        [
          { text: 'BEGIN ISOLATION LEVEL REPEATABLE READ' },
          { text: 'SELECT doc FROM networks WHERE name = $1', values: [name] },
          { text: 'SELECT doc FROM log WHERE network = $1 ORDER BY version', values: [name] },
          { text: 'SELECT doc FROM members WHERE network = $1', values: [name] },
          { text: 'COMMIT' },
        ],
        true,
      );
      const record = rec!.rows[0]?.doc as NetworkRecord | undefined;
      if (!record) continue;
      // Read meanwhile by a transaction of this controller's own: nothing to apply.
      const now = this.#known.get(name);
      if (now !== undefined && now >= record.version) continue;
      const all = log!.rows.map((r) => r.doc as LogEntry);
      const entries = now === undefined ? all : all.filter((e) => e.version > now);
      const whole = now === undefined || entries[0]?.version !== now + 1;
      changes.push({ network: name, record, entries: whole ? all : entries, members: whole ? m!.rows.map((r) => r.doc as MemberRecord) : null });
    }
    for (const name of [...this.#known.keys()]) if (!there.has(name)) changes.push({ network: name, record: null, entries: [], members: null });
    for (const c of changes) {
      if (c.record) this.#known.set(c.network, c.record.version);
      else this.#known.delete(c.network);
      this.#apply?.(c);
    }
    if (changes.length > 0) this.counts.caughtUp++;
    return changes.length;
  }

  /** The node's sync record as last written, read without waiting. */
  async syncRecordAsync(network: string, id: string): Promise<SyncRecord | undefined> {
    const [r] = await this.#db.runAsync([{ text: `SELECT ${SYNC_READ} FROM sync WHERE network = $1 AND id = $2`, values: [network, id] }]);
    const row = r!.rows[0];
    return row ? syncFromRow(row) : undefined;
  }

  /** The sync records of these nodes as last written, read without waiting (none while the database is down). */
  async syncRecordsAsync(network: string, ids: string[]): Promise<Map<string, SyncRecord>> {
    if (!this.#db.health().up) return new Map();
    const [r] = await this.#db.runAsync([{ text: `SELECT id, ${SYNC_READ} FROM sync WHERE network = $1 AND id = ANY($2)`, values: [network, ids] }]);
    return new Map(r!.rows.map((x) => [x.id as string, syncFromRow(x)]));
  }

  /** Opens a transaction, takes the lock (held to its end) and applies what others committed since. */
  #catchUpLocked(): number {
    const [, , versions] = this.#db.run([
      { text: 'BEGIN' },
      { text: 'SELECT pg_advisory_xact_lock($1)', values: [STORE_LOCK] },
      { text: 'SELECT name, version FROM networks' },
    ]);
    const there = new Map(versions!.rows.map((r) => [r.name as string, r.version as number]));
    const changes: RemoteChange[] = [];
    for (const [name, version] of there) {
      const known = this.#known.get(name);
      if (known !== undefined && known >= version) continue;
      const [rec, log] = this.#db.run([
        { text: 'SELECT doc FROM networks WHERE name = $1', values: [name] },
        { text: 'SELECT doc FROM log WHERE network = $1 AND version > $2 ORDER BY version', values: [name, known ?? 0] },
      ]);
      const record = rec!.rows[0]!.doc as NetworkRecord;
      let entries = log!.rows.map((r) => r.doc as LogEntry);
      // The log no longer reaches back to what this replica knew (or the network is new here): every member, and the whole log.
      const whole = known === undefined || entries[0]?.version !== known + 1;
      let members: MemberRecord[] | null = null;
      if (whole) {
        const [m, all] = this.#db.run([
          { text: 'SELECT doc FROM members WHERE network = $1', values: [name] },
          { text: 'SELECT doc FROM log WHERE network = $1 ORDER BY version', values: [name] },
        ]);
        members = m!.rows.map((r) => r.doc as MemberRecord);
        entries = all!.rows.map((r) => r.doc as LogEntry);
      }
      changes.push({ network: name, record, entries, members });
    }
    for (const name of this.#known.keys()) if (!there.has(name)) changes.push({ network: name, record: null, entries: [], members: null });
    for (const c of changes) {
      if (c.record) this.#known.set(c.network, c.record.version);
      else this.#known.delete(c.network);
      this.#apply?.(c);
    }
    if (changes.length > 0) this.counts.caughtUp++;
    return changes.length;
  }

  #rollback(): void {
    try {
      this.#db.run([{ text: 'ROLLBACK' }]);
    } catch {
      // The connection is gone with its transaction: nothing to roll back.
    }
  }

  #op(text: string, values: unknown[]): void {
    if (this.#ops) this.#ops.push({ text, values });
    else this.transaction(() => this.#ops!.push({ text, values }));
  }

  syncRecord(network: string, id: string): SyncRecord | undefined {
    const row = this.#db.rows<Row>(`SELECT ${SYNC_READ} FROM sync WHERE network = $1 AND id = $2`, [network, id])[0];
    return row ? syncFromRow(row) : undefined;
  }

  /** For the gaps a read shows (node list): while the database is down, none newer than memory's (the read answers from it). */
  syncRecords(network: string, ids: string[]): Map<string, SyncRecord> {
    if (!this.#db.health().up) return new Map();
    const rows = this.#db.rows<Row>(`SELECT id, ${SYNC_READ} FROM sync WHERE network = $1 AND id = ANY($2)`, [network, ids]);
    return new Map(rows.map((r) => [r.id as string, syncFromRow(r)]));
  }

  putNetwork(n: NetworkRecord): void {
    this.#op('INSERT INTO networks (name, version, doc) VALUES ($1, $2, $3) ON CONFLICT (name) DO UPDATE SET version = EXCLUDED.version, doc = EXCLUDED.doc', [
      n.name,
      n.version,
      JSON.stringify(n),
    ]);
    if (this.#ops) this.#put.set(n.name, n.version);
  }
  putMember(network: string, m: MemberRecord): void {
    this.#op('INSERT INTO members (network, id, doc) VALUES ($1, $2, $3) ON CONFLICT (network, id) DO UPDATE SET doc = EXCLUDED.doc', [
      network,
      m.id,
      JSON.stringify(m),
    ]);
  }
  deleteMember(network: string, id: string): void {
    this.#op('DELETE FROM members WHERE network = $1 AND id = $2', [network, id]);
  }
  appendLog(network: string, e: LogEntry): void {
    this.#op('INSERT INTO log (network, version, doc) VALUES ($1, $2, $3) ON CONFLICT (network, version) DO UPDATE SET doc = EXCLUDED.doc', [
      network,
      e.version,
      JSON.stringify(e),
    ]);
  }
  truncateLog(network: string, floor: number): void {
    this.#op('DELETE FROM log WHERE network = $1 AND version <= $2', [network, floor]);
  }
  putSync(network: string, id: string, s: SyncRecord): void {
    const r = syncToRow(s);
    this.#op(
      `INSERT INTO sync (network, id, ${SYNC_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
       ON CONFLICT (network, id) DO UPDATE SET ${SYNC_COLUMNS.split(', ')
         .map((c) => `${c} = EXCLUDED.${c}`)
         .join(', ')}`,
      [network, id, r.applied, r.applied_hash, r.sent, r.basis, r.target, r.snapshot_pending, r.expectations, r.doc],
    );
  }
  deleteSync(network: string, id: string): void {
    this.#op('DELETE FROM sync WHERE network = $1 AND id = $2', [network, id]);
  }
  putToken(t: TokenRecord): void {
    this.#op('INSERT INTO tokens (token, doc) VALUES ($1, $2) ON CONFLICT (token) DO UPDATE SET doc = EXCLUDED.doc', [t.token, JSON.stringify(t)]);
  }
  deleteToken(token: string): void {
    this.#op('DELETE FROM tokens WHERE token = $1', [token]);
  }
  deleteNetwork(name: string): void {
    this.#op('DELETE FROM networks WHERE name = $1', [name]);
    this.#op('DELETE FROM log WHERE network = $1', [name]);
    // Its own removal is no remote change: forgotten here once committed.
    this.#put.delete(name);
    this.#gone.add(name);
  }
  /** The change's audit row (issue 28), a statement of the open transaction: committed with the change or not at all. */
  appendAudit(e: AuditEntry, trimBefore: string): void {
    this.#op('DELETE FROM audit_log WHERE at < $1', [trimBefore]);
    this.#op('INSERT INTO audit_log (at, actor, network, method, node, summary, state_version) VALUES ($1, $2, $3, $4, $5, $6, $7)', [
      e.at,
      e.actor,
      e.network,
      e.method,
      e.node,
      e.summary,
      e.stateVersion,
    ]);
  }
  close(): void {
    this.#db.close();
  }
}

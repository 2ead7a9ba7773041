/**
 * The committed image (issue 24): the controller's records as its store holds them. The controller
 * writes through this wrapper around the configured ControllerStore; every write is forwarded at
 * once and buffered, and the buffer reaches the image only when the store's outermost transaction
 * returned (a nested one that throws drops its own writes, as SQLite's savepoint does). What other
 * controllers committed (`follow`) goes to the image at once.
 *
 * When a transaction throws, the store rolled back: `rolledBack` is told which networks the
 * transaction wrote and which nodes' sync records, and the controller puts its memory back as the
 * image holds it (state.ts `restore`). Copies are taken on the way in, so the image never shares an
 * object with the memory the controller goes on changing.
 */
import type { ControllerStore, StoredState, TokenRecord } from '@meshp/core';
import type { LogEntry, MemberRecord, NetworkRecord, SyncRecord } from '@meshp/core/delta';
import { storeError } from '../store-errors.js';
import { Image, imageKey } from './image.js';
import type { StoreHealth } from './store-health.js';

/** What a transaction that threw had written: the networks (records, members, log) and the nodes' sync records. */
export interface Touched {
  networks: Set<string>;
  sync: Set<string>;
}

type Op = (img: Image) => void;

/** How many times a change another controller overtook is computed again before it is refused. */
export const STALE_RETRIES = 5;

/** The store's guard did not hold: another controller committed between the read and the commit. */
const isStale = (e: unknown): boolean => typeof e === 'object' && e !== null && (e as { stale?: unknown }).stale === true;

export class CommittedStore implements ControllerStore {
  image = new Image();
  /** One buffer per open transaction, the outermost first. */
  readonly #open: Op[][] = [];
  #touched: Touched = { networks: new Set(), sync: new Set() };
  /** The transaction threw and the store rolled back: the controller puts its memory back (state.ts). */
  rolledBack: (t: Touched) => void = () => undefined;

  readonly follow?: ControllerStore['follow'];
  readonly syncRecord?: ControllerStore['syncRecord'];
  readonly catchUp?: ControllerStore['catchUp'];
  readonly syncRecords?: ControllerStore['syncRecords'];
  readonly transactionAsync?: ControllerStore['transactionAsync'];
  readonly catchUpAsync?: ControllerStore['catchUpAsync'];
  readonly syncRecordAsync?: ControllerStore['syncRecordAsync'];
  readonly syncRecordsAsync?: ControllerStore['syncRecordsAsync'];
  readonly appendAudit?: ControllerStore['appendAudit'];
  /** Networks an asynchronous change wrote whose commit is not answered yet: nothing of them is sent meanwhile (the hub holds its pumps). */
  readonly settling = new Set<string>();
  /** Told of each network whose asynchronous change was committed or put back: the held pumps go. */
  settled: (network: string) => void = () => undefined;
  /** The asynchronous calls, one after the other (a change reads, computes and commits before the next begins). */
  #chain: Promise<unknown> = Promise.resolve();
  /** An asynchronous change's code is running (its writes make their networks settling). */
  #asyncOpen = false;

  constructor(
    readonly inner: ControllerStore,
    readonly health: StoreHealth,
  ) {
    // The optional parts of a shared store exist here only when the store has them (callers look).
    if (inner.follow) {
      const follow = inner.follow.bind(inner);
      this.follow = (apply) =>
        follow((c) => {
          this.image.applyRemote(c);
          apply(c);
        });
    }
    if (inner.syncRecord) {
      const f = inner.syncRecord.bind(inner);
      this.syncRecord = (network, id) => this.#read(() => f(network, id));
    }
    if (inner.catchUp) {
      const f = inner.catchUp.bind(inner);
      this.catchUp = () => this.#read(f);
    }
    if (inner.syncRecords) {
      const f = inner.syncRecords.bind(inner);
      this.syncRecords = (network, ids) => this.#read(() => f(network, ids));
    }
    if (inner.transactionAsync) this.transactionAsync = (fn) => this.#serial(() => this.#transactionAsync(fn));
    if (inner.catchUpAsync) {
      const f = inner.catchUpAsync.bind(inner);
      this.catchUpAsync = () => this.#serial(() => this.#readAsync(f));
    }
    if (inner.syncRecordAsync) {
      const f = inner.syncRecordAsync.bind(inner);
      this.syncRecordAsync = (network, id) => this.#readAsync(() => f(network, id));
    }
    // The audit row of a change, a write of its transaction like any other (nothing of it in the image).
    if (inner.appendAudit) {
      const f = inner.appendAudit.bind(inner);
      this.appendAudit = (e, trimBefore) =>
        this.#write(
          null,
          null,
          () => f(e, trimBefore),
          () => undefined,
        );
    }
    if (inner.syncRecordsAsync) {
      const f = inner.syncRecordsAsync.bind(inner);
      this.syncRecordsAsync = (network, ids) => this.#readAsync(() => f(network, ids));
    }
  }

  #serial<T>(f: () => Promise<T>): Promise<T> {
    const p = this.#chain.then(f, f);
    this.#chain = p.catch(() => undefined);
    return p;
  }

  async #readAsync<T>(f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (e) {
      throw this.health.failed(storeError(e));
    }
  }

  /**
   * One change through a store across the network (see ControllerStore.transactionAsync): `fn`
   * runs against memory with its writes buffered, as in `transaction`; the networks it wrote are
   * `settling` until the commit is answered; then the buffer reaches the image, or memory is put
   * back as the image holds it. A commit another controller overtook is put back and run again on
   * what it committed (a few times; then refused, MESHP_STORE_UNAVAILABLE).
   */
  async #transactionAsync(fn: () => void): Promise<void> {
    const inner = this.inner.transactionAsync!.bind(this.inner);
    for (let attempt = 1; ; attempt++) {
      const ops: Op[] = [];
      const mine: Touched = { networks: new Set(), sync: new Set() };
      let own: { e: unknown } | null = null;
      try {
        await inner(() => {
          if (this.#open.length > 0) throw new Error('an asynchronous change inside a store transaction');
          this.#touched = mine;
          this.#open.push(ops);
          this.#asyncOpen = true;
          try {
            fn();
          } catch (e) {
            own = { e };
            throw e;
          } finally {
            this.#asyncOpen = false;
            this.#open.pop();
          }
        });
      } catch (e) {
        const ownErr = own !== null && (own as { e: unknown }).e === e && !this.#storeRaised.has(e as object);
        this.#afterCommit.length = 0;
        this.rolledBack(mine);
        this.#settle(mine);
        if (!ownErr && isStale(e) && attempt < STALE_RETRIES) {
          this.health.recomputed++;
          continue;
        }
        throw ownErr ? e : this.health.failed(storeError(e));
      }
      for (const op of ops) op(this.image);
      // A read (nothing written) says nothing of whether the store takes writes.
      if (ops.length > 0) this.health.ok();
      this.#settle(mine);
      this.#runAfterCommit();
      return;
    }
  }

  /**
   * `f` once the outermost open transaction committed, at once when none is open; dropped when it
   * is put back. A fan-out asked from inside a change (an admin call's change and its audit row, one
   * transaction) must not note a version that a rollback then takes away (hub.ts poke).
   */
  afterCommit(f: () => void): void {
    if (this.#open.length === 0) return f();
    this.#afterCommit.push(f);
  }
  readonly #afterCommit: (() => void)[] = [];

  #runAfterCommit(): void {
    for (const f of this.#afterCommit.splice(0)) f();
  }

  #settle(t: Touched): void {
    for (const n of t.networks) if (this.settling.delete(n)) this.settled(n);
  }

  load(): StoredState {
    const s = this.#read(() => this.inner.load());
    this.image = Image.of(s);
    return s;
  }

  transaction(fn: () => void): void {
    const outermost = this.#open.length === 0;
    if (outermost) this.#touched = { networks: new Set(), sync: new Set() };
    const ops: Op[] = [];
    this.#open.push(ops);
    let thrown: { e: unknown } | null = null;
    try {
      this.inner.transaction(() => {
        try {
          fn();
        } catch (e) {
          thrown = { e };
          throw e;
        }
      });
    } catch (e) {
      this.#open.pop();
      // The caller's own refusal passes as it is; what the store raised is sorted and makes the store down.
      const own = thrown !== null && (thrown as { e: unknown }).e === e && !this.#storeRaised.has(e as object);
      const err = own ? e : this.health.failed(storeError(e));
      if (outermost) {
        this.#afterCommit.length = 0;
        this.rolledBack(this.#touched);
      }
      throw err;
    }
    this.#open.pop();
    if (outermost) {
      for (const op of ops) op(this.image);
      this.health.ok();
      this.#runAfterCommit();
    } else this.#open.at(-1)!.push(...ops);
  }

  /** Errors the inner store's writes raised inside a transaction (not the caller's own refusals). */
  readonly #storeRaised = new WeakSet<object>();

  /** Forwards a write; its effect on the image is buffered until the outermost transaction returned. */
  #write(network: string | null, syncId: string | null, forward: () => void, op: Op): void {
    if (network !== null) this.#touched.networks.add(network);
    // Settling from its first write: a fan-out the same change asks for waits for the commit's answer (hub.ts).
    if (network !== null && this.#asyncOpen) this.settling.add(network);
    if (syncId !== null) this.#touched.sync.add(syncId);
    try {
      forward();
    } catch (e) {
      const err = storeError(e);
      this.#storeRaised.add(err);
      throw err;
    }
    const ops = this.#open.at(-1);
    if (ops) ops.push(op);
    else {
      op(this.image);
      this.health.ok();
    }
  }

  #read<T>(fn: () => T): T {
    try {
      return fn();
    } catch (e) {
      throw this.health.failed(storeError(e));
    }
  }

  putNetwork(n: NetworkRecord): void {
    const copy = structuredClone(n);
    this.#write(
      n.name,
      null,
      () => this.inner.putNetwork(n),
      (img) => img.networks.set(copy.name, copy),
    );
  }
  putMember(network: string, m: MemberRecord): void {
    const copy = structuredClone(m);
    this.#write(
      network,
      null,
      () => this.inner.putMember(network, m),
      (img) => img.membersOf(network).set(copy.id, copy),
    );
  }
  deleteMember(network: string, id: string): void {
    this.#write(
      network,
      null,
      () => this.inner.deleteMember(network, id),
      (img) => img.membersOf(network).delete(id),
    );
  }
  appendLog(network: string, e: LogEntry): void {
    const copy = structuredClone(e);
    this.#write(
      network,
      null,
      () => this.inner.appendLog(network, e),
      (img) => {
        const list = img.log.get(network) ?? [];
        // Once per version: a commit of this controller's may have reached the image already as a catch-up read it (a store across the network).
        const at = list.findIndex((x) => x.version === copy.version);
        if (at >= 0) list[at] = copy;
        else list.push(copy);
        img.log.set(network, list);
      },
    );
  }
  truncateLog(network: string, floor: number): void {
    this.#write(
      network,
      null,
      () => this.inner.truncateLog(network, floor),
      (img) => {
        const list = img.log.get(network);
        if (list)
          img.log.set(
            network,
            list.filter((e) => e.version > floor),
          );
      },
    );
  }
  putSync(network: string, id: string, s: SyncRecord): void {
    // Copied a level deep, not cloned (a structured clone of each record on every send and every ack
    // was 7% of a join's fan-out at N = 1,000, issue 31): the record's own fields, and its lists as
    // lists. What they hold is never changed in place: the last deltas sent are summaries made once
    // (sync.ts `summary`), expectations are frozen where made and the list replaced whole, `graced`
    // is a list of ids replaced whole, a report is replaced by a new one (sync-protocol.ts, session.ts).
    // The memory the image puts back after a rollback is a deep clone of it (state.ts restore).
    const copy: SyncRecord = {
      ...s,
      recent: [...s.recent],
      expectations: [...s.expectations],
      ...(s.graced ? { graced: [...s.graced] } : {}),
      ...(s.reported ? { reported: { ...s.reported } } : {}),
    };
    this.#write(
      null,
      imageKey(network, id),
      () => this.inner.putSync(network, id, s),
      (img) => img.sync.set(imageKey(network, id), copy),
    );
  }
  deleteSync(network: string, id: string): void {
    this.#write(
      null,
      imageKey(network, id),
      () => this.inner.deleteSync(network, id),
      (img) => img.sync.delete(imageKey(network, id)),
    );
  }
  putToken(t: TokenRecord): void {
    const copy = structuredClone(t);
    this.#write(
      null,
      null,
      () => this.inner.putToken(t),
      (img) => img.tokens.set(copy.token, copy),
    );
  }
  deleteToken(token: string): void {
    this.#write(
      null,
      null,
      () => this.inner.deleteToken(token),
      (img) => img.tokens.delete(token),
    );
  }
  deleteNetwork(name: string): void {
    this.#write(
      name,
      null,
      () => this.inner.deleteNetwork(name),
      (img) => {
        img.networks.delete(name);
        img.log.delete(name);
        img.members.delete(name);
      },
    );
  }
  close(): void {
    this.inner.close();
  }
}

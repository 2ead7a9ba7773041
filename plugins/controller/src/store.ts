import type { LogEntry, MemberRecord, NetworkRecord, SyncRecord } from '@meshp/core/delta';
import type { TokenRecord } from './tokens.js';

/** Everything the controller persists, as loaded on start. */
export interface StoredState {
  networks: NetworkRecord[];
  members: { network: string; member: MemberRecord }[];
  log: { network: string; entry: LogEntry }[];
  sync: { network: string; id: string; sync: SyncRecord }[];
  tokens: TokenRecord[];
}

/**
 * The controller's persistence. Synchronous (SQLite through better-sqlite3 is), and every change the
 * controller makes goes through one `transaction`, so a restart finds either all of it or none.
 */
export interface ControllerStore {
  load(): StoredState;
  transaction(fn: () => void): void;
  putNetwork(n: NetworkRecord): void;
  putMember(network: string, m: MemberRecord): void;
  deleteMember(network: string, id: string): void;
  appendLog(network: string, e: LogEntry): void;
  /** Forgets log entries of versions ≤ floor. */
  truncateLog(network: string, floor: number): void;
  putSync(network: string, id: string, s: SyncRecord): void;
  deleteSync(network: string, id: string): void;
  putToken(t: TokenRecord): void;
  deleteToken(token: string): void;
  /** Forgets a network with its log (its members and sync records are gone already). */
  deleteNetwork(name: string): void;
  close(): void;
  /**
   * A store shared by several controllers (store-postgres): `apply` is called with what the others
   * committed, before this one's next transaction and when the store is told of it.
   */
  follow?(apply: (c: RemoteChange) => void): void;
  /** The node's sync record as last written (shared store: its stream may have been on another controller). */
  syncRecord?(network: string, id: string): SyncRecord | undefined;
  /** Applies what other controllers committed, now (shared store; see `follow`); how many networks changed. */
  catchUp?(): number;
  /** The sync records of these nodes as last written (shared store), by node. */
  syncRecords?(network: string, ids: string[]): Map<string, SyncRecord>;
}

/** What another controller sharing the store committed to one network (see `ControllerStore.follow`). */
export interface RemoteChange {
  network: string;
  /** The network as committed; null: it was removed. */
  record: NetworkRecord | null;
  /** The entries past the version this controller knew, in order; with `members`, the whole log kept. */
  entries: LogEntry[];
  /** Every member, when the entries do not reach back to the version known (or the network is new here). */
  members: MemberRecord[] | null;
}

const key = (network: string, id: string): string => `${network}\u0000${id}`;

/**
 * In memory; copies on the way in and out so the controller never shares objects with it.
 * `serialise()` / `MemoryStore.from()` stand in for a restart from persisted state.
 */
export class MemoryStore implements ControllerStore {
  #networks = new Map<string, NetworkRecord>();
  #members = new Map<string, { network: string; member: MemberRecord }>();
  #log = new Map<string, LogEntry[]>();
  #sync = new Map<string, { network: string; id: string; sync: SyncRecord }>();
  #tokens = new Map<string, TokenRecord>();

  static from(serialised: string): MemoryStore {
    const s = JSON.parse(serialised) as StoredState;
    const m = new MemoryStore();
    for (const n of s.networks) m.putNetwork(n);
    for (const r of s.members) m.putMember(r.network, r.member);
    for (const r of s.log) m.appendLog(r.network, r.entry);
    for (const r of s.sync) m.putSync(r.network, r.id, r.sync);
    for (const t of s.tokens) m.putToken(t);
    return m;
  }

  serialise(): string {
    return JSON.stringify(this.load());
  }

  load(): StoredState {
    return structuredClone({
      networks: [...this.#networks.values()],
      members: [...this.#members.values()],
      log: [...this.#log].flatMap(([network, entries]) => entries.map((entry) => ({ network, entry }))),
      sync: [...this.#sync.values()],
      tokens: [...this.#tokens.values()],
    });
  }

  transaction(fn: () => void): void {
    fn();
  }
  putNetwork(n: NetworkRecord): void {
    this.#networks.set(n.name, structuredClone(n));
  }
  putMember(network: string, member: MemberRecord): void {
    this.#members.set(key(network, member.id), { network, member: structuredClone(member) });
  }
  deleteMember(network: string, id: string): void {
    this.#members.delete(key(network, id));
  }
  appendLog(network: string, e: LogEntry): void {
    const list = this.#log.get(network) ?? [];
    list.push(structuredClone(e));
    this.#log.set(network, list);
  }
  truncateLog(network: string, floor: number): void {
    const list = this.#log.get(network);
    if (!list) return;
    let drop = 0;
    while (drop < list.length && list[drop]!.version <= floor) drop++;
    list.splice(0, drop);
  }
  putSync(network: string, id: string, sync: SyncRecord): void {
    this.#sync.set(key(network, id), { network, id, sync: structuredClone(sync) });
  }
  deleteSync(network: string, id: string): void {
    this.#sync.delete(key(network, id));
  }
  putToken(t: TokenRecord): void {
    this.#tokens.set(t.token, structuredClone(t));
  }
  deleteToken(token: string): void {
    this.#tokens.delete(token);
  }
  deleteNetwork(name: string): void {
    this.#networks.delete(name);
    this.#log.delete(name);
  }
  close(): void {}
}

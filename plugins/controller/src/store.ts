import type { ControllerStore, StoredState, TokenRecord } from '@meshp/core';
import type { LogEntry, MemberRecord, NetworkRecord, SyncRecord } from '@meshp/core/delta';

// The store seam is core's (core/src/contract/store.ts); named here too for the controller's importers.
export type { ControllerStore, RemoteChange, StoredState } from '@meshp/core';

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

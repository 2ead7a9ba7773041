/**
 * The committed image's records (committed.ts): the controller's networks, members, log, sync
 * records and tokens as its store holds them, copies that never share an object with memory.
 */
import type { RemoteChange, StoredState, TokenRecord } from '@meshp/core';
import type { LogEntry, MemberRecord, NetworkRecord, SyncRecord } from '@meshp/core/delta';

export const imageKey = (network: string, id: string): string => `${network}\u0000${id}`;

/** The records as committed, by network. */
export class Image {
  readonly networks = new Map<string, NetworkRecord>();
  readonly members = new Map<string, Map<string, MemberRecord>>();
  readonly log = new Map<string, LogEntry[]>();
  /** Sync records by imageKey(network, id). */
  readonly sync = new Map<string, SyncRecord>();
  /** Enrolment tokens by the hash kept (tokens.ts reads them here: a token is taken only once its removal committed). */
  readonly tokens = new Map<string, TokenRecord>();

  membersOf(network: string): Map<string, MemberRecord> {
    let m = this.members.get(network);
    if (!m) this.members.set(network, (m = new Map()));
    return m;
  }

  /** What another controller committed to one network (as remote.ts applies it to memory). */
  applyRemote(c: RemoteChange): void {
    if (!c.record) {
      this.#forget(c.network);
      return;
    }
    const members = this.membersOf(c.network);
    const put = (id: string, after: MemberRecord | null) => {
      if (after) members.set(id, structuredClone(after));
      else {
        members.delete(id);
        this.sync.delete(imageKey(c.network, id));
      }
    };
    let log = this.log.get(c.network) ?? [];
    if (c.members) {
      const ids = new Set(c.members.map((m) => m.id));
      for (const id of [...members.keys()]) if (!ids.has(id)) put(id, null);
      for (const m of c.members) put(m.id, m);
      log = structuredClone(c.entries);
    } else {
      for (const e of c.entries) {
        if (log.some((x) => x.version === e.version)) continue;
        if (e.kind === 'member') put(e.id, e.after);
        else if (e.kind === 'members') for (const x of e.changes) put(x.id, x.after);
        log.push(structuredClone(e));
      }
    }
    const r = structuredClone(c.record);
    this.networks.set(c.network, r);
    this.log.set(
      c.network,
      log.filter((e) => e.version > r.logFloor && e.version <= r.version).sort((a, b) => a.version - b.version),
    );
  }

  #forget(network: string): void {
    this.networks.delete(network);
    this.log.delete(network);
    for (const id of this.members.get(network)?.keys() ?? []) this.sync.delete(imageKey(network, id));
    this.members.delete(network);
  }

  /** Loaded from what the store holds at start. */
  static of(s: StoredState): Image {
    const img = new Image();
    for (const n of s.networks) img.networks.set(n.name, structuredClone(n));
    for (const { network, member } of s.members) img.membersOf(network).set(member.id, structuredClone(member));
    for (const { network, entry } of s.log) {
      const list = img.log.get(network) ?? [];
      list.push(structuredClone(entry));
      img.log.set(network, list);
    }
    for (const list of img.log.values()) list.sort((a, b) => a.version - b.version);
    for (const { network, id, sync } of s.sync) img.sync.set(imageKey(network, id), structuredClone(sync));
    for (const t of s.tokens) img.tokens.set(t.token, structuredClone(t));
    return img;
  }
}

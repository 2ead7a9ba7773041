import { PolicyIndex, TagIndex } from './policy.js';
import type { LogEntry, MemberRecord, ModuleDef, NetworkRecord, SyncRecord } from './records.js';

/**
 * The members' sync records, with an index of who may hold each peer in a tunnel grace
 * (SyncRecord.graced): a removal tells those nodes without a look at every record. The index may
 * name a holder no longer holding the peer (checked against the record where it is read), never
 * miss one: a record is indexed as it is put, and `trackGraced` (sync.ts) indexes what it adds.
 */
export class SyncRecords extends Map<string, SyncRecord> {
  /** peer → nodes whose record may list it in `graced`. */
  readonly #holders = new Map<string, Set<string>>();

  override set(id: string, sync: SyncRecord): this {
    for (const peer of sync.graced ?? []) this.graced(peer, id);
    return super.set(id, sync);
  }

  /** `holder`'s record lists `peer` in its grace. */
  graced(peer: string, holder: string): void {
    let s = this.#holders.get(peer);
    if (!s) this.#holders.set(peer, (s = new Set()));
    s.add(holder);
  }

  /** The nodes whose record lists `peer` in its grace now (the stale names in the index are dropped). */
  holdersOf(peer: string): string[] {
    const s = this.#holders.get(peer);
    if (!s) return [];
    const out: string[] = [];
    for (const id of s) {
      if (this.get(id)?.graced?.includes(peer)) out.push(id);
      else s.delete(id);
    }
    if (s.size === 0) this.#holders.delete(peer);
    return out;
  }
}

/** One network in memory: its record, members, indexes and change log. */
export class NetworkState {
  readonly members = new Map<string, MemberRecord>();
  readonly sync = new SyncRecords();
  readonly tags = new TagIndex();
  /** node key → member id: an enrolment checks its key in O(1), not by scanning the members. */
  readonly byKey = new Map<string, string>();
  /** Entries of versions (record.logFloor, record.version], one per version, in order. */
  log: LogEntry[] = [];
  policy: PolicyIndex;
  /**
   * The last version whose change may have moved each member's view (scope.ts `affectedBy`), noted
   * as each change is made (`touched`), and the last one that may have moved every view: what came
   * before this state was loaded is not known, so that counts as everyone's. A member not touched
   * after its basis has the view it was sent (sync.ts `pending`) without a walk of the log.
   */
  readonly #touched = new Map<string, number>();
  #touchedAll: number;

  constructor(public record: NetworkRecord) {
    this.policy = new PolicyIndex(record.policy);
    this.#touchedAll = record.version;
  }

  get version(): number {
    return this.record.version;
  }

  /** The last version whose change may have moved the member's view (never less than the truth). */
  touchedAt(id: string): number {
    return Math.max(this.#touched.get(id) ?? 0, this.#touchedAll);
  }

  /** The change of `version` may have moved the view of these members; null: of every member. */
  touch(version: number, ids: Iterable<string> | null): void {
    if (ids === null) {
      this.#touchedAll = Math.max(this.#touchedAll, version);
      this.#touched.clear();
      return;
    }
    for (const id of ids) if (this.members.has(id)) this.#touched.set(id, version);
  }

  /** The entries after version `a`, or null when the log no longer reaches back to `a`. */
  since(a: number): LogEntry[] | null {
    if (a < this.record.logFloor || a > this.record.version) return null;
    return this.log.slice(a - this.record.logFloor);
  }

  moduleOf = (name: string): ModuleDef | null => this.record.modules[name] ?? null;

  putMember(m: MemberRecord): void {
    const old = this.members.get(m.id);
    if (old) this.tags.remove(old);
    if (old && this.byKey.get(old.nodeKey) === old.id) this.byKey.delete(old.nodeKey);
    this.members.set(m.id, m);
    this.tags.add(m);
    this.byKey.set(m.nodeKey, m.id);
  }

  deleteMember(id: string): void {
    const old = this.members.get(id);
    if (old) this.tags.remove(old);
    if (old && this.byKey.get(old.nodeKey) === id) this.byKey.delete(old.nodeKey);
    this.members.delete(id);
    this.#touched.delete(id);
  }
}

import { PolicyIndex, TagIndex } from './policy.js';
import type { LogEntry, MemberRecord, ModuleDef, NetworkRecord, SyncRecord } from './records.js';

/** One network in memory: its record, members, indexes and change log. */
export class NetworkState {
  readonly members = new Map<string, MemberRecord>();
  readonly sync = new Map<string, SyncRecord>();
  readonly tags = new TagIndex();
  /** node key → member id: an enrolment checks its key in O(1), not by scanning the members. */
  readonly byKey = new Map<string, string>();
  /** Entries of versions (record.logFloor, record.version], one per version, in order. */
  log: LogEntry[] = [];
  policy: PolicyIndex;

  constructor(public record: NetworkRecord) {
    this.policy = new PolicyIndex(record.policy);
  }

  get version(): number {
    return this.record.version;
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
  }
}

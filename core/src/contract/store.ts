/**
 * The controller's store seam: what a controller persists and how a store keeps it. The controller
 * (plugins/controller) writes through `ControllerStore` and `AuthBook`; its own SQLite stores and
 * `@meshp/store-postgres` implement them, against this file alone. The records they keep
 * (`NetworkRecord`, `MemberRecord`, `LogEntry`, `SyncRecord`) are the delta protocol's controller
 * half (core/src/delta/controller/records.ts); the helpers both stores share (token rows, the
 * hash of a secret, the hosting's tables) are in `@meshp/core/store`.
 */
import type { Mode } from './model.js';
import type { ReportMessage } from './transport.js';
import type { LogEntry, MemberRecord, NetworkRecord, SyncRecord } from '../delta/controller/records.js';

/** A one-time enrolment token as the store keeps it. */
export interface TokenRecord {
  token: string;
  network: string;
  mode: Mode;
  tags: string[];
  expiresAt: string;
  /** issue 28: the member it enrols is ephemeral, removed after this many seconds without a stream (absent: kept). */
  ephemeralSeconds?: number;
}

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
 * controller makes goes through one `transaction`, so a restart finds either all of it or none; a
 * store across the network also has the asynchronous calls below, which the hosting uses so that
 * its event loop never waits on the database.
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
  /**
   * issue 28: the audit row of the change being made, written in the open transaction (the entries
   * before `trimBefore` forgotten in it too), so the change and its row commit together or not at
   * all. Absent (a store without the audit log, e.g. in memory): the hosting appends it after.
   */
  appendAudit?(e: AuditEntry, trimBefore: string): void;
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
  /**
   * A store across the network (store-postgres) takes a change without the event loop waiting on
   * it: what others committed is applied first (`follow`), then `fn` runs (the controller's change,
   * synchronous, its writes collected), then the writes are committed in one round trip. It throws
   * an error whose `stale` is true when another controller committed in between (the caller puts
   * its memory back and runs `fn` again). One at a time: the controller serializes them.
   */
  transactionAsync?(fn: () => void): Promise<void>;
  /** `catchUp`, without waiting. */
  catchUpAsync?(): Promise<number>;
  /** `syncRecord`, without waiting. */
  syncRecordAsync?(network: string, id: string): Promise<SyncRecord | undefined>;
  /** `syncRecords`, without waiting. */
  syncRecordsAsync?(network: string, ids: string[]): Promise<Map<string, SyncRecord>>;
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

/** An enrolment token as the hosting keeps it, by the hash of its secret (the secret itself is never stored). */
export interface StoredToken {
  network: string;
  mode: Mode;
  tags: string[];
  fingerprint: string;
  expiresAt: string;
  usedAt: string | null;
  usedBy: string | null;
  /** The node key the token was used with (null: used before keys were kept, or not used). */
  usedKey: string | null;
  /** When the node first opened a stream with the credential it got: from then on the token is spent for good. */
  confirmedAt: string | null;
  /** When the operator revoked it (`meshp token revoke`): no enrolment takes it from then on. */
  revokedAt?: string | null;
  /** When it was made (null: made before creation times were kept). */
  createdAt?: string | null;
  /** issue 28 (ADR 0042): a reusable token enrols up to this many nodes (null or absent: one, by usedAt). */
  maxUses?: number | null;
  /** A reusable token's uses taken (each a row of its own: TokenUse). */
  uses?: number;
  /** The nodes it enrols are ephemeral: removed after this many seconds without a stream (null or absent: kept). */
  ephemeralSeconds?: number | null;
}

/** One use of a reusable token (issue 28): by which node and key, when, and whether the node opened its stream since. */
export interface TokenUse {
  node: string;
  nodeKey: string;
  usedAt: string;
  confirmedAt: string | null;
}

/** A token as `token list` shows it: its id is the first TOKEN_ID_CHARS of its hash (never the secret). */
export interface TokenInfo extends StoredToken {
  id: string;
}

/** What a revocation found: the token as it is now, and whether this call revoked it. */
export interface TokenRevocation {
  token: TokenInfo;
  revoked: boolean;
}

/** One row of hosting_tokens (the SQLite and PostgreSQL stores' rows have the same columns). */
export interface TokenRow {
  hash: string;
  network: string;
  mode: Mode;
  tags: string;
  fingerprint: string;
  expires_at: string;
  used_at: string | null;
  used_by: string | null;
  used_key: string | null;
  confirmed_at: string | null;
  revoked_at?: string | null;
  created_at?: string | null;
  max_uses?: number | null;
  uses?: number | null;
  ephemeral_seconds?: number | null;
}

/**
 * What the hosting needs of its token and credential store: the controller's AuthStore (SQLite),
 * and store-postgres's for replicas.
 */
export interface AuthBook {
  putToken(secret: string, t: Omit<StoredToken, 'usedAt' | 'usedBy' | 'usedKey' | 'confirmedAt' | 'revokedAt'>): void;
  getToken(secret: string): StoredToken | null;
  /** Single use: true only for the first caller (never for a revoked token). The key is kept: an enrolment whose answer was lost is completed with it. */
  markUsed(secret: string, by: string, at: string, nodeKey: string): boolean;
  /**
   * A reusable token's use taken (issue 28): true only while uses remain (the count's conditional
   * update decides, across replicas too), with the node and its key kept (a lost answer's retry).
   */
  takeUse(secret: string, by: string, at: string, nodeKey: string): boolean;
  /** The use of a reusable token made with this node key, if any. */
  tokenUse(secret: string, nodeKey: string): TokenUse | null;
  /** The network's tokens, newest first (those made before creation times were kept last), for `token list`. */
  listTokens(network: string): TokenInfo[];
  /** `token revoke ID`: an unused token made unusable (see revokeRow in `@meshp/core/store`). */
  revokeToken(network: string, id: string, at: string): TokenRevocation;
  /** The node opened a stream with its credential: the token it enrolled with is spent for good. */
  confirm(network: string, node: string, at: string): void;
  /** Called after a token is marked used: the next hello looks for it. */
  pendingAdded(): void;
  putCredential(credential: string, network: string, node: string): void;
  nodeOf(credential: string): { network: string; node: string } | null;
  /** The node is removed: its credentials go and its key is revoked in the network. */
  revoke(network: string, node: string, nodeKey: string, at: string): void;
  /** The keys revoked when a node of this name was removed, in any network. */
  revokedKeysOf(node: string): { network: string; nodeKey: string; at: string }[];
  /** Who held the key when it was revoked, or null. */
  revokedKey(network: string, nodeKey: string): { node: string; at: string } | null;
  /** The credential, the report and the name the agent may still say in its hello follow a rename. */
  rename(network: string, from: string, to: string): void;
  /** The name `old` carries now, when it was renamed. */
  renamedTo(network: string, old: string): string | null;
  /** The node's last report, as it came (for doctor). */
  putReport(network: string, node: string, report: ReportMessage): void;
  /** `putReport` without the event loop waiting (a store across the network); kept in memory at once. */
  putReportAsync?(network: string, node: string, report: ReportMessage): Promise<void>;
  report(network: string, node: string): ReportMessage | null;
  close(): void;

  // ---- a store across the network, read and written without the event loop waiting (issue 24) ----
  // Absent (SQLite, on the controller's own disk): the synchronous calls above.

  /** What a hello needs, in one read: see HelloFacts. */
  helloFactsAsync?(credential: string, node: string): Promise<HelloFacts>;
  /** `confirm` without waiting. */
  confirmAsync?(network: string, node: string, at: string): Promise<void>;
  /** What an enrolment reads, in one read: see EnrolFacts. */
  enrolFactsAsync?(secret: string, nodeKey: string): Promise<EnrolFacts>;
  /** `markUsed` without waiting: the row's update is the arbiter still. */
  markUsedAsync?(secret: string, by: string, at: string, nodeKey: string): Promise<boolean>;
  /** `takeUse` without waiting: one conditional update of the count (its row lock), the use written in the same statement. */
  takeUseAsync?(secret: string, by: string, at: string, nodeKey: string): Promise<boolean>;
  /** Replicas (issue 28): the ephemeral nodes whose streams this replica holds, seen now (each replica reaps only those none has seen within their grace). */
  markSeenAsync?(network: string, nodes: string[], at: string): Promise<void>;
  /** When a replica last saw each of the network's ephemeral nodes (by node). */
  lastSeenAsync?(network: string): Promise<Map<string, string>>;
  /** `putCredential` without waiting, in one transaction. */
  putCredentialAsync?(credential: string, network: string, node: string): Promise<void>;
  putTokenAsync?(secret: string, t: Omit<StoredToken, 'usedAt' | 'usedBy' | 'usedKey' | 'confirmedAt' | 'revokedAt'>): Promise<void>;
  listTokensAsync?(network: string): Promise<TokenInfo[]>;
  revokeTokenAsync?(network: string, id: string, at: string): Promise<TokenRevocation>;
  revokeAsync?(network: string, node: string, nodeKey: string, at: string): Promise<void>;
  renameAsync?(network: string, from: string, to: string): Promise<void>;
  /**
   * The last reports of these nodes (null: of the network's every node), as any replica wrote them,
   * read into memory: `report` then answers from it without waiting. A read the store refuses
   * leaves memory as it was (the last reports known here).
   */
  loadReportsAsync?(network: string, nodes: string[] | null): Promise<void>;
}

/** What a hello reads of the hosting's tables (session.ts). */
export interface HelloFacts {
  /** Whose the credential is, or null (never issued, or revoked). */
  owner: { network: string; node: string } | null;
  /** In the owner's network, the name `node` (the name the hello says) carries now, when it was renamed. */
  renamedTo: string | null;
  /** The keys revoked when a node named `node` was removed, in any network (read only when there is no owner). */
  revokedKeys: { network: string; nodeKey: string; at: string }[];
}

/** What an enrolment reads of the hosting's tables (enrolment.ts). */
export interface EnrolFacts {
  token: StoredToken | null;
  /** A reusable token's use made with the enrolling node's key, if any (its retry completes it). */
  use?: TokenUse | null;
  /** In the token's network, who held the node key when it was revoked, or null. */
  revoked: { node: string; at: string } | null;
}

/** One admin change as the audit log keeps it (issue 28): when, by whom, in which network, what, and the version it made. */
export interface AuditEntry {
  /** ISO time the change was answered. */
  at: string;
  /** The admin credential's name ("admin": the one credential a controller makes). */
  actor: string;
  network: string;
  /** The admin method (`setPolicy`, `removeNode`, …). */
  method: string;
  /** The node the change is about, or null. */
  node: string | null;
  /** What changed, before and after where there is a before, in one line. */
  summary: string;
  /** The network's state version once the change was made (0: the network is gone, or has none). */
  stateVersion: number;
}

export interface AuditQuery {
  network: string;
  /** Entries at or after this ISO time. */
  since?: string;
  node?: string;
  /** The newest this many, oldest first. */
  limit: number;
}

/** The audit log: kept in the controller's store (SQLite or PostgreSQL), trimmed by age, not by the delta log's depth. */
export interface AuditBook {
  appendAudit(e: AuditEntry): void;
  /**
   * A store across the network: the entries before `trimBefore` forgotten and `e` appended in one
   * transaction, without the event loop waiting (issue 24). Absent: `trimAudit` and `appendAudit`.
   */
  appendAuditAsync?(e: AuditEntry, trimBefore: string): Promise<void>;
  listAudit(q: AuditQuery): AuditEntry[];
  /** `listAudit` without the event loop waiting (a store across the network). */
  listAuditAsync?(q: AuditQuery): Promise<AuditEntry[]>;
  /** Forgets the entries before this ISO time; how many. */
  trimAudit(before: string): number;
  close(): void;
}

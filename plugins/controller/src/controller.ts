import type { AuditEntry, Dns, Mode, RouteGroup, StateDelta, WireDeclaration } from '@meshp/core';
import {
  SCOPE_RULE,
  type AckResult,
  type MemberRecord,
  type ModuleDef,
  type PolicyRule,
  type PolicyTestRecord,
  type RelayRecord,
  type ReportedHandshakes,
  type ReportedState,
  type SentSummary,
  type SharedComponentName,
  type SharedComponents,
} from '@meshp/core/delta';
import type { ControllerStore } from './store.js';
import type { TokenRecord } from './tokens.js';
import type { NodeStatus } from './status.js';
import { applyRemote } from './remote.js';
import { checkTags } from './limits.js';
import { ControllerState } from './controller/state.js';
import type { ControllerOptions, MemberInput } from './controller/options.js';
import * as log from './controller/log.js';
import * as networks from './controller/networks.js';
import * as members from './controller/members.js';
import { recordRelease, recordUntake } from './controller/untake.js';
import * as protocol from './controller/sync-protocol.js';
import { flushSync } from './controller/group-commit.js';
import type { StoreHealth } from './controller/store-health.js';
import type { StoredSync } from './controller/sync-protocol.js';
import * as queries from './controller/queries.js';
import * as dns from './controller/dns.js';
import type { DnsChange, DnsReadback } from './controller/dns.js';
import * as routes from './controller/routes.js';
import * as relays from './controller/relays.js';
import type { RelayChange, RelayState } from './controller/relays.js';
import type { NodeRoute, RouteChange, RouteGroupStatus } from './controller/routes.js';

export type { ControllerOptions, MemberInput, VersionSigner } from './controller/options.js';
export type { StoreHealth, StoreHealthView } from './controller/store-health.js';

/**
 * The controller's state and the delta protocol's server side, without a transport: the gRPC
 * service calls `deltaFor`, `ack`, `hello` and `resync`. Every change bumps the network's version,
 * is logged, and is persisted in one store transaction.
 *
 * The class is the API; each concept is its own file under controller/: the changes (networks.ts,
 * members.ts) and the log and versions (log.ts), the sync protocol (sync-protocol.ts) and the group
 * commit of its records (group-commit.ts), the queries (queries.ts), over one state (state.ts).
 */
export class Controller {
  readonly #s: ControllerState;
  /** Store transactions that wrote sync records by group commit, and records written (for tests and the bench). */
  readonly syncWrites: { flushes: number; records: number };
  /** A store shared with other controllers told this one of their change to a network (after it was applied here). */
  onRemoteChange: ((network: string) => void) | null = null;

  /**
   * Whether the store takes writes (up, or down since when, the last error's code), and its errors
   * by code: /metrics shows it, the hosting logs its changes. A change the store refuses is refused
   * to its caller with the store's code and shows nowhere in memory (controller/committed.ts).
   */
  readonly storeHealth: StoreHealth;

  constructor(store: ControllerStore, options: ControllerOptions = {}) {
    this.#s = new ControllerState(store, options);
    this.syncWrites = this.#s.syncWrites;
    this.storeHealth = this.#s.health;
    for (const net of this.#s.networks.values()) if ((net.record.scopeRule ?? 1) < SCOPE_RULE) log.rescopeNetwork(this.#s, net);
    this.#s.store.follow?.((c) => {
      applyRemote(this.#s.networks, c);
      this.onRemoteChange?.(c.network);
    });
  }

  // ---- networks, policy, components, the catalogue (controller/networks.ts) ----------------------

  /** `privateNetwork: 'tunnel'` (genesis without --private-interface): members raise the tunnel by default, and one without is flagged. */
  createNetwork(name: string, options: { logDepth?: number; privateRange?: string; privateNetwork?: 'tunnel' | 'interface' } = {}): void {
    networks.createNetwork(this.#s, name, options);
  }

  /** A network with no member left is forgotten, with its log. */
  removeNetwork(name: string): void {
    networks.removeNetwork(this.#s, name);
  }

  setPolicy(network: string, rules: PolicyRule[], tests: PolicyTestRecord[] = []): number {
    return networks.setPolicy(this.#s, network, rules, tests);
  }

  setComponent<K extends SharedComponentName>(network: string, name: K, value: SharedComponents[K]): number {
    return networks.setComponent(this.#s, network, name, value);
  }

  /** The network's DNS as set, with the domain in force and the foundation names (controller/dns.ts, issue 25). */
  dns(network: string): DnsReadback {
    return dns.getDns(this.#s, network);
  }

  /** Replaces the network's DNS; `preview`: nothing changed, the nodes whose answers would change said. */
  setDns(network: string, value: Dns, preview = false): DnsChange {
    return dns.setDns(this.#s, network, value, preview);
  }

  /** The network's route groups, each with its primary and its users (controller/routes.ts, issue 26). */
  routeGroups(network: string): RouteGroupStatus[] {
    return routes.listRouteGroups(this.#s, network);
  }

  /** Adds or replaces a route group by name; `preview`: nothing changed, the nodes that would change said. */
  setRouteGroup(network: string, group: RouteGroup, preview = false): RouteChange {
    return routes.setRouteGroup(this.#s, network, group, preview);
  }

  /** Approves prefixes a node advertises (`advertised`: from its last report) into a group. */
  approveRoute(
    network: string,
    node: string,
    advertised: readonly string[],
    prefixes: readonly string[],
    group: string,
    preview = false,
  ): RouteChange & { group: RouteGroup } {
    return routes.approveRoute(this.#s, network, node, advertised, prefixes, group, preview);
  }

  /** The admin's setting of the exit node a node uses (ADR 0039); `preview`: nothing changed, the nodes that would change said. */
  setExitNode(network: string, node: string, choice: { group?: string; off?: boolean }, preview = false): RouteChange & routes.ExitNodeStatus {
    return routes.setExitNode(this.#s, network, node, choice, preview);
  }

  /** The agent's own ask (its Hello's exit_node), kept as the node's choice; null: nothing changed. */
  exitAsked(network: string, node: string, group: string): RouteChange | null {
    return routes.exitAsked(this.#s, network, node, group);
  }

  /** The agent's ask kept for the node ('' none). */
  exitAskedOf(network: string, node: string): string {
    return routes.exitAskedOf(this.#s, network, node);
  }

  /** Which exit node the node uses, and why (ADR 0039). */
  exitNodeOf(network: string, node: string): routes.ExitNodeStatus {
    return routes.exitNodeOf(this.#s, network, node);
  }

  /** The groups the node serves or may use, each with its primary. */
  nodeRoutes(network: string, node: string): NodeRoute[] {
    return routes.nodeRoutes(this.#s, network, node);
  }

  /** Whether the node is a via node of a route group (its stream's liveness then moves primaries). */
  servesRoutes(network: string, node: string): boolean {
    return routes.servesRoutes(this.#s, network, node);
  }

  /** The node's stream opened or ended: failover of the groups it serves (controller/routes.ts); null: nothing moved. */
  routeLiveness(network: string, node: string, up: boolean, isUp: (id: string) => boolean): Record<string, string> | null {
    return routes.routeLiveness(this.#s, network, node, up, isUp);
  }

  removeRouteGroup(network: string, name: string, preview = false): RouteChange {
    return routes.removeRouteGroup(this.#s, network, name, preview);
  }

  /** The network's relays, each with whether its secret is held (controller/relays.ts, issue 27). */
  relays(network: string): RelayState[] {
    return relays.listRelays(this.#s, network);
  }

  /** Adds or replaces a relay by id; `secret`: its secret's value ('' keeps the one held); `preview`: nothing changed. */
  setRelay(network: string, relay: Partial<RelayRecord>, secret: string, preview = false, nowS = Math.floor(Date.now() / 1000)): RelayChange {
    return relays.setRelay(this.#s, network, relay, secret, preview, nowS);
  }

  removeRelay(network: string, id: string, preview = false): RelayChange {
    return relays.removeRelay(this.#s, network, id, preview);
  }

  /** New relay credentials for every member when half the lifetime of those in force is gone: the version, or null. */
  renewRelayCredentials(network: string, nowS = Math.floor(Date.now() / 1000)): number | null {
    return relays.renewRelayCredentials(this.#s, network, nowS);
  }

  defineModule(network: string, def: ModuleDef): number {
    return networks.defineModule(this.#s, network, def);
  }

  /** Several modules as one change to the store (catalogue add): all of them or none (networks.ts). */
  defineModules(network: string, defs: ModuleDef[]): number {
    return networks.defineModules(this.#s, network, defs);
  }

  /**
   * Forgets a module of the catalogue. One assigned to a node is refused (MESHP_MODULE_ASSIGNED,
   * naming the nodes): a node never keeps an assignment of a module that no longer exists.
   */
  removeModule(network: string, name: string): number {
    return networks.removeModule(this.#s, network, name);
  }

  // ---- memberships and tokens (controller/members.ts) ---------------------------------------------

  join(network: string, input: MemberInput): number {
    return members.join(this.#s, network, input);
  }

  leave(network: string, id: string): number {
    return members.leave(this.#s, network, id);
  }

  /** A new name for the node, in one version; its sync record follows it (members.ts). */
  renameNode(network: string, id: string, to: string): number {
    const v = members.renameNode(this.#s, network, id, to);
    // A via node's groups follow its new name in the next version: one delta carries both (routes.ts).
    return id === to ? v : (routes.renameVia(this.#s, network, id, to) ?? v);
  }

  updateMember(network: string, id: string, patch: Partial<Omit<MemberRecord, 'id'>>): number {
    return members.updateMember(this.#s, network, id, patch);
  }

  rotateKey(network: string, id: string, nodeKey: string): number {
    return members.updateMember(this.#s, network, id, { nodeKey });
  }

  // ---- expiry (issue 28, ADR 0041: controller/members.ts) -----------------------------------------

  /** How long a node's credential lives from its enrolment or renewal (seconds), and whether that is the default. */
  nodeLifetime(network: string): { seconds: number; isDefault: boolean } {
    return { seconds: members.nodeLifetime(this.#s, network), isDefault: this.#s.net(network).record.nodeLifetimeSeconds === undefined };
  }

  /** The network's node lifetime from now on; answers the one before. No version: no view moves. */
  setNodeLifetime(network: string, seconds: number): number {
    return members.setNodeLifetime(this.#s, network, seconds);
  }

  /** The node expired now: every peer drops it in this one version; it stays a member. */
  expireNode(network: string, id: string): number {
    return members.expireNode(this.#s, network, id);
  }

  /** The node's credential renewed for `seconds` (the network's lifetime when absent): an expired node is back in one version. */
  renewNode(network: string, id: string, seconds?: number): number {
    return members.renewNode(this.#s, network, id, seconds);
  }

  /** The nodes whose expiry has come, recorded expired: one version per network. */
  expireDue(): { network: string; nodes: string[]; version: number }[] {
    return members.expireDue(this.#s);
  }

  /** The earliest expiry not yet recorded (ms since the epoch), or null. */
  nextExpiry(): number | null {
    return members.nextExpiry(this.#s);
  }

  /**
   * When the node's expiry falls and when its agent renews it; null: it never expires. Asked on every
   * pump and every agent message (issue 31: 5% of a join's fan-out was these dates parsed and written
   * again), so a member record's parsed expiry and renewal time are kept by record: records are
   * replaced on every change, never changed in place (as components.ts sharedPeer relies on).
   */
  expiryOf(network: string, id: string): { expiresAt: string; renewAt: string; expired: boolean } | null {
    const m = this.member(network, id);
    if (!m?.expiresAt) return null;
    let e = this.#expiries.get(m);
    if (!e) this.#expiries.set(m, (e = { at: Date.parse(m.expiresAt), renewAt: members.renewAtOf(m) }));
    return e.renewAt ? { expiresAt: m.expiresAt, renewAt: e.renewAt, expired: !!m.expiredAt || e.at <= Date.parse(this.#s.now()) } : null;
  }

  /** A member record's expiry (ms) and renewal time, made once per record (expiryOf). */
  readonly #expiries = new WeakMap<MemberRecord, { at: number; renewAt: string | null }>();

  /** The node's new tunnel key, a normal change; the same key again changes nothing, '' withdraws it (members.ts). */
  setTunnelKey(network: string, id: string, tunnelKey: string): number {
    return members.setTunnelKey(this.#s, network, id, tunnelKey);
  }

  /** The node's tags replaced, bounded as an enrolment's (limits.ts); the same tags again change nothing. */
  setTags(network: string, id: string, tags: string[]): number {
    checkTags(tags);
    return members.updateMember(this.#s, network, id, { tags });
  }

  /** A mode set without a preview: a converged node's agent flips only a machine with nothing to close. */
  setMode(network: string, id: string, mode: Mode): number {
    return members.setMode(this.#s, network, id, mode);
  }

  /** The operator's flip: the node converged, to exactly this preview (docs/adr/0002). */
  recordConverged(network: string, id: string, previewId: string): number {
    return members.recordConverged(this.#s, network, id, previewId);
  }

  assignModule(network: string, id: string, module: string): number {
    return members.assignModule(this.#s, network, id, module);
  }

  unassignModule(network: string, id: string, module: string): number {
    return members.unassignModule(this.#s, network, id, module);
  }

  /** The module's cutover on this node; it must be assigned first. */
  takeModule(network: string, id: string, module: string): number {
    return members.takeModule(this.#s, network, id, module);
  }

  /** A module's untake, to exactly this preview (issue 29): sent not taken, with the preview id (controller/untake.ts). */
  recordUntake(network: string, id: string, module: string, previewId: string): number {
    return recordUntake(this.#s, network, id, module, previewId);
  }

  /** A module released: unassigned; with a preview id, its held files changed while held put back to that preview (issue 29). */
  recordRelease(network: string, id: string, module: string, previewId: string | null): number {
    return recordRelease(this.#s, network, id, module, previewId);
  }

  createToken(network: string, options: { mode?: Mode; tags?: string[]; ttlSeconds?: number; ephemeralSeconds?: number } = {}): TokenRecord {
    return members.createToken(this.#s, network, options);
  }

  /** Joins with a one-time token: the mode comes from the token (docs/adr/0002). */
  enrol(token: string, input: Omit<MemberInput, 'mode' | 'tags'>): { network: string; member: MemberRecord } {
    return members.enrol(this.#s, token, input);
  }

  // ---- the change log (controller/log.ts) ---------------------------------------------------------

  /** How many changes the network's log keeps for deltas. */
  logDepth(network: string): number {
    return queries.logDepth(this.#s, network);
  }

  /** Keeps `depth` changes from now on (an agent further behind gets a snapshot); a shorter log is cut at once. */
  setLogDepth(network: string, depth: number): void {
    log.setLogDepth(this.#s, network, depth);
  }

  /** Forgets all but the last `keep` changes (the log is also bounded by its depth on every change). */
  truncateLog(network: string, keep: number): void {
    log.truncateLog(this.#s, network, keep);
  }

  // ---- the delta protocol (controller/sync-protocol.ts; core's sync.ts) --------------------------

  /** What to send the node now (see `nextDelta`); null: nothing to send. */
  deltaFor(network: string, id: string): StateDelta | null {
    return protocol.deltaFor(this.#s, network, id);
  }

  /**
   * The nodes whose view the changes after version `since` may have changed (scope.ts), for the
   * fan-out; null: any node (a shared component, or a log that no longer reaches back).
   */
  affectedSince(network: string, since: number): Set<string> | null {
    return protocol.affectedSince(this.#s, network, since);
  }

  /** The node's view at the current version and its hash, without touching its sync state. */
  snapshotOf(network: string, id: string): { delta: StateDelta; hash: string } {
    return protocol.snapshotOf(this.#s, network, id);
  }

  /** Only an ack whose hash matches the one computed for its version moves the applied version. */
  ack(network: string, id: string, appliedVersion: number, hash: string): AckResult {
    return protocol.ack(this.#s, network, id, appliedVersion, hash);
  }

  /** When a snapshot held back by the backoff may go (epoch ms), or null; and why none goes at all (sync-protocol.ts). */
  snapshotHold(network: string, id: string): { retryAt: number | null; diverged: string | null } {
    return protocol.snapshotHold(this.#s, network, id);
  }

  /** A new stream: resume from the agent's own version, or snapshot; an agent past this controller's version moves it ahead (sync-protocol.ts). */
  /**
   * `stored`: the node's sync record as a store across the network holds it, read before without
   * waiting (`storedSyncAsync`); absent, the store is read here.
   */
  hello(network: string, id: string, appliedVersion: number, hash: string, versionSignature?: Uint8Array, revision?: number, stored?: StoredSync): AckResult {
    return protocol.hello(this.#s, network, id, appliedVersion, hash, versionSignature, revision, stored);
  }

  /** A store across the network: the node's sync record as it holds it, read without the event loop waiting, for `hello`. */
  async storedSyncAsync(network: string, id: string): Promise<StoredSync | undefined> {
    const read = this.#s.store.syncRecordAsync;
    return read ? { record: await read(network, id) } : undefined;
  }

  /** The agent refused a delta or lost its view: the next answer is a snapshot. */
  resync(network: string, id: string): void {
    protocol.resync(this.#s, network, id);
  }

  report(network: string, id: string, r: { firewallKind?: string; held?: number; changed?: number; reported?: ReportedState }): void {
    protocol.report(this.#s, network, id, r);
  }

  /** The tunnel handshakes of the node's last report, as kept (the next report carries since when it has had peers). */
  reportedHandshakes(network: string, id: string): ReportedHandshakes | undefined {
    return protocol.reportedHandshakes(this.#s, network, id);
  }

  /** A shared store: what other controllers committed, applied now (a node enrolled there a moment ago). */
  refresh(): void {
    this.#s.store.catchUp?.();
  }

  /**
   * A shared store: the sync records of the nodes whose streams are elsewhere (`here` says which are
   * on this controller) as their controller last wrote them, so a gap read here is theirs.
   */
  reloadSync(network: string, here: (id: string) => boolean): void {
    protocol.reloadSync(this.#s, network, here);
  }

  /** `reloadSync` without the event loop waiting on the store (a store across the network). */
  reloadSyncAsync(network: string, here: (id: string) => boolean): Promise<void> {
    return protocol.reloadSyncAsync(this.#s, network, here);
  }

  // ---- a store across the network, without waiting on it (controller/committed.ts) --------------

  /** Whether `change` commits without the event loop waiting on the store (store-postgres). */
  get asyncStore(): boolean {
    return !!this.#s.store.transactionAsync;
  }

  /**
   * Runs `fn` (the caller's calls on this controller) as one store transaction. With a store across
   * the network: after catching up with the other controllers, one at a time, without the event loop
   * waiting; the networks it wrote send nothing until the commit is answered (`settling`), and memory
   * keeps the change only if it committed (run again when another controller committed first).
   * Otherwise at once, as the calls commit by themselves.
   */
  async change<T>(fn: () => T): Promise<T> {
    const run = this.#s.store.transactionAsync;
    if (!run) return fn();
    let out: T | undefined;
    await run(() => {
      out = fn();
    });
    return out as T;
  }

  /** Whether the store writes a change's audit row in the change's own transaction (issue 28: `auditedChange`). */
  get auditsInTransaction(): boolean {
    return !!this.#s.store.appendAudit;
  }

  /** `fn` as one store transaction (nested: a part of the open one): its writes and an audit row commit together. */
  atomically<T>(fn: () => T): T {
    let out: T | undefined;
    this.#s.store.transaction(() => {
      out = fn();
    });
    return out as T;
  }

  /** The audit row of the change being made, in its transaction (only inside `atomically`, on a store that `auditsInTransaction`). */
  recordAudit(e: AuditEntry, trimBefore: string): void {
    this.#s.store.appendAudit!(e, trimBefore);
  }

  /** `f` once the store transaction open now committed (at once when none is), never if it is put back. */
  afterCommit(f: () => void): void {
    this.#s.store.afterCommit(f);
  }

  /** A network whose change is being committed: nothing of it is sent until `onSettled` says so. */
  settling(network: string): boolean {
    return this.#s.store.settling.has(network);
  }

  /** Told of a network whose change was committed or put back (the pumps held for it may go). */
  set onSettled(f: (network: string) => void) {
    this.#s.store.settled = f;
  }

  /** `refresh` without waiting (a store across the network): what the others committed, applied. */
  async refreshAsync(): Promise<void> {
    await this.#s.store.catchUpAsync?.();
  }

  /** Writes the sync records changed since the last flush, in one transaction; answers how many (controller/group-commit.ts). */
  flushSync(): number {
    return flushSync(this.#s);
  }

  /** The last flush is tried once; one the store refuses loses at most that interval's sync records (the crash-safe rule, group-commit.ts). */
  close(): void {
    try {
      flushSync(this.#s);
    } catch {
      // Said by the store's health; the records are the ones a crash would lose.
    }
    if (this.#s.flushTimer) clearTimeout(this.#s.flushTimer);
    this.#s.flushTimer = null;
    this.#s.store.close();
  }

  // ---- queries (controller/queries.ts) ------------------------------------------------------------

  networks(): string[] {
    return queries.networks(this.#s);
  }

  /** The network's private range and size, for `network list`. */
  networkInfo(name: string): { name: string; stateVersion: number; members: number; privateRange: string } {
    return queries.networkInfo(this.#s, name);
  }

  /** Whether the network's private network is the tunnel (said at its making; see NetworkRecord.privateNetwork). */
  isTunnelNetwork(network: string): boolean {
    return queries.isTunnelNetwork(this.#s, network);
  }

  stateVersion(network: string): number {
    return queries.stateVersion(this.#s, network);
  }

  member(network: string, id: string): MemberRecord | undefined {
    return queries.member(this.#s, network, id);
  }

  /** The member enrolled with this node key, if any (an index, not a scan). */
  memberByKey(network: string, nodeKey: string): MemberRecord | undefined {
    return queries.memberByKey(this.#s, network, nodeKey);
  }

  members(network: string): MemberRecord[] {
    return queries.members(this.#s, network);
  }

  policy(network: string): PolicyRule[] {
    return queries.policy(this.#s, network);
  }

  /** The policy file in force: its rules, its tests and the version that set it (issue 28). */
  policyInForce(network: string): { rules: PolicyRule[]; tests: PolicyTestRecord[]; policyVersion: number; stateVersion: number } {
    return queries.policyInForce(this.#s, network);
  }

  /** The declaration the node is sent now. */
  declarationOf(network: string, id: string): WireDeclaration {
    return queries.declarationOf(this.#s, network, id);
  }

  /** The network's catalogue: every module defined, in name order (copies: the caller cannot change the record). */
  modules(network: string): ModuleDef[] {
    return queries.modules(this.#s, network);
  }

  /** Every membership with its convergence gap (state_version − applied_version). */
  listNodes(network: string): NodeStatus[] {
    return queries.listNodesPage(this.#s, network, '', Infinity).nodes;
  }

  /**
   * One page of listNodes, in its order (by id): the nodes after `after` ('' from the first), at most
   * `limit`; `next` is the page's last id when more follow, else ''. Only the page's statuses are computed.
   */
  listNodesPage(network: string, after: string, limit: number): { nodes: NodeStatus[]; next: string } {
    return queries.listNodesPage(this.#s, network, after, limit);
  }

  showNode(network: string, id: string): { node: NodeStatus; recentDeltas: SentSummary[] } {
    return queries.showNode(this.#s, network, id);
  }

  doctor(
    network: string,
    id: string,
  ): { node: NodeStatus; recentDeltas: SentSummary[]; expectedHash: string; hashMatches: boolean; snapshotPending: boolean; logFloor: number } {
    return queries.doctor(this.#s, network, id);
  }
}

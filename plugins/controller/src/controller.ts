import { MeshpError, type Mode, type StateDelta, type WireDeclaration } from '@meshp/core';
import { stateHash, versionPayload, SCOPE_RULE, rescope, declarationFor, computeSnapshot, NetworkState, PolicyIndex, DEFAULT_RESYNC_BOUNDS, checkAppliedVersion, nextDelta, noteChange, recoverExpectation, refreshTarget, snapshotAsked, takeAck, takeHello, affectedBy, type AckResult, type ResyncBounds, type LogEntry, type MemberRecord, type ModuleDef, type NetworkRecord, type PolicyRule, type ReportedHandshakes, type ReportedState, type SentSummary, type SharedComponentName, type SharedComponents, type SyncRecord } from '@meshp/core/delta';
import type { ControllerStore } from './store.js';
import { TokenBook, type TokenRecord } from './tokens.js';
import { newSync, statusOf, type NodeStatus } from './status.js';
import { checkAssigned, checkMember, checkModule, checkPolicy, checkTags } from './limits.js';
import { checkNoClash } from './clash.js';
import { checkTunnelKey } from './tunnel-key.js';
import { applyRemote } from './remote.js';
import { checkDeclarable, checkDefinable } from './declarable.js';

export interface ControllerOptions {
  /** Changes kept per network for deltas; an agent further behind gets a snapshot. */
  logDepth?: number;
  /** Deltas sent kept per membership, for doctor. */
  keepSent?: number;
  /**
   * Signs (network, to_version, state_hash) of every delta sent, and checks the signature a hello
   * presents for a version past the network's. Without one, such a hello is taken on trust (a
   * library use; the hosted controller always has one).
   */
  signer?: VersionSigner;
  /** Backoff between snapshots asked for in a row, and how many before a membership is diverged. */
  resync?: Partial<ResyncBounds>;
  now?: () => string;
  /**
   * Group commit of sync records (what each node was sent, what it acked, its last report): written
   * together at most this long (ms) after the first change among them, in one transaction, never one
   * write per ack. 0 (the default for a library use): each is written at once. See `flushSync`.
   */
  syncFlushMs?: number;
}

export interface VersionSigner {
  sign(payload: Uint8Array): Uint8Array;
  verify(payload: Uint8Array, signature: Uint8Array): boolean;
}

export interface MemberInput {
  id: string;
  nodeKey: string;
  addresses?: string[];
  tags?: string[];
  endpoints?: string[];
  mode?: Mode;
  settings?: MemberRecord['settings'];
  /** The node's WireGuard public key (base64), when it runs a tunnel. */
  tunnelKey?: string;
}

/**
 * The controller's state and the delta protocol's server side, without a transport: the gRPC
 * service calls `deltaFor`, `ack`, `hello` and `resync`. Every change bumps the network's version,
 * is logged, and is persisted in one store transaction.
 */
export class Controller {
  readonly #store: ControllerStore;
  readonly #networks = new Map<string, NetworkState>();
  readonly #tokens: TokenBook;
  readonly #logDepth: number;
  readonly #keepSent: number;
  readonly #now: () => string;
  readonly #resync: ResyncBounds;
  readonly #signer: VersionSigner | undefined;
  readonly #syncFlushMs: number;
  /** Sync records changed since the last flush, by network and node. */
  readonly #dirty = new Map<string, { net: NetworkState; id: string }>();
  #flushTimer: ReturnType<typeof setTimeout> | null = null;
  /** Store transactions that wrote sync records by group commit, and records written (for tests and the bench). */
  readonly syncWrites = { flushes: 0, records: 0 };
  /** A store shared with other controllers told this one of their change to a network (after it was applied here). */
  onRemoteChange: ((network: string) => void) | null = null;

  constructor(store: ControllerStore, options: ControllerOptions = {}) {
    this.#store = store;
    this.#logDepth = options.logDepth ?? 1000;
    this.#keepSent = options.keepSent ?? 8;
    this.#now = options.now ?? (() => new Date().toISOString());
    this.#resync = { ...DEFAULT_RESYNC_BOUNDS, ...options.resync };
    this.#signer = options.signer;
    this.#syncFlushMs = options.syncFlushMs ?? 0;
    const s = store.load();
    for (const n of s.networks) this.#networks.set(n.name, new NetworkState(n));
    for (const { network, member } of s.members) this.#net(network).putMember(member);
    for (const { network, entry } of s.log) this.#net(network).log.push(entry);
    for (const { network, id, sync } of s.sync) this.#net(network).sync.set(id, sync);
    this.#tokens = new TokenBook(store, this.#now, s.tokens);
    for (const net of this.#networks.values()) net.log.sort((a, b) => a.version - b.version);
    for (const net of this.#networks.values()) if ((net.record.scopeRule ?? 1) < SCOPE_RULE) this.#rescope(net);
    store.follow?.((c) => {
      applyRemote(this.#networks, c);
      this.onRemoteChange?.(c.network);
    });
  }

  /** A network written under an older scope rule: its views checked once, those that differ snapshotted (sync.ts rescope). */
  #rescope(net: NetworkState): void {
    const changed = rescope(net);
    this.#store.transaction(() => {
      this.#store.putNetwork(net.record);
      for (const id of changed) this.#store.putSync(net.record.name, id, net.sync.get(id)!);
    });
  }

  // ---- networks and memberships --------------------------------------------------------------

  /** `privateNetwork: 'tunnel'` (genesis without --private-interface): members raise the tunnel by default, and one without is flagged. */
  createNetwork(name: string, options: { logDepth?: number; privateRange?: string; privateNetwork?: 'tunnel' | 'interface' } = {}): void {
    if (this.#networks.has(name)) throw new MeshpError('MESHP_USAGE', `network ${name} exists`);
    const record: NetworkRecord = {
      name,
      version: 0,
      logFloor: 0,
      logDepth: options.logDepth ?? this.#logDepth,
      policy: [],
      components: { dns: { nameservers: [], searchDomains: [], records: [] }, relays: { relays: [] }, routeGroups: { groups: [] } },
      modules: {},
      privateRange: options.privateRange ?? '100.96.0.0/16',
      ...(options.privateNetwork ? { privateNetwork: options.privateNetwork } : {}),
      nextHost: 1,
      scopeRule: SCOPE_RULE,
    };
    this.#networks.set(name, new NetworkState(record));
    this.#store.transaction(() => this.#store.putNetwork(record));
  }

  networks(): string[] {
    return [...this.#networks.keys()];
  }

  /** A network with no member left is forgotten, with its log. */
  removeNetwork(name: string): void {
    const net = this.#net(name);
    if (net.members.size > 0) throw new MeshpError('MESHP_USAGE', `network ${name} still has ${net.members.size} node(s): remove them first`);
    this.#networks.delete(name);
    this.#store.transaction(() => this.#store.deleteNetwork(name));
  }

  /** The network's private range and size, for `network list`. */
  networkInfo(name: string): { name: string; stateVersion: number; members: number; privateRange: string } {
    const net = this.#net(name);
    return { name, stateVersion: net.version, members: net.members.size, privateRange: net.record.privateRange };
  }

  /** Whether the network's private network is the tunnel (said at its making; see NetworkRecord.privateNetwork). */
  isTunnelNetwork(network: string): boolean {
    return this.#net(network).record.privateNetwork === 'tunnel';
  }

  stateVersion(network: string): number {
    return this.#net(network).version;
  }

  member(network: string, id: string): MemberRecord | undefined {
    return this.#net(network).members.get(id);
  }

  /** The member enrolled with this node key, if any (an index, not a scan). */
  memberByKey(network: string, nodeKey: string): MemberRecord | undefined {
    const net = this.#net(network);
    const id = net.byKey.get(nodeKey);
    if (id === undefined) return undefined;
    const m = net.members.get(id);
    // Kept in step by putMember/deleteMember; a library use may give two members one key: then look.
    return m?.nodeKey === nodeKey ? m : [...net.members.values()].find((x) => x.nodeKey === nodeKey);
  }

  members(network: string): MemberRecord[] {
    return [...this.#net(network).members.values()];
  }

  policy(network: string): PolicyRule[] {
    return [...this.#net(network).record.policy];
  }

  join(network: string, input: MemberInput): number {
    checkMember(input);
    const net = this.#net(network);
    if (net.members.has(input.id)) throw new MeshpError('MESHP_USAGE', `node ${input.id} is already in ${network}`);
    if (input.tunnelKey) checkTunnelKey(input.tunnelKey, net.members.values(), input.id);
    const m: MemberRecord = {
      id: input.id,
      nodeKey: input.nodeKey,
      addresses: input.addresses ? [...input.addresses] : [allocate(net.record)],
      tags: sorted(input.tags ?? []),
      endpoints: [...(input.endpoints ?? [])],
      mode: input.mode ?? 'converged',
      assigned: [],
      taken: [],
      settings: input.settings ?? { ports: {} },
      ...(input.tunnelKey ? { tunnelKey: input.tunnelKey } : {}),
    };
    return this.#changeMember(net, input.id, m, true);
  }

  leave(network: string, id: string): number {
    const net = this.#net(network);
    this.#member(net, id);
    return this.#changeMember(net, id, null);
  }

  /**
   * A new name for the node, in one version: its peers see the old name removed and the new one
   * upserted in the same delta (same key, so a tunnel keyed by it need not move); its sync record
   * follows it.
   */
  renameNode(network: string, id: string, to: string): number {
    const net = this.#net(network);
    const before = this.#member(net, id);
    if (net.members.has(to)) throw new MeshpError('MESHP_USAGE', `node ${to} is already in ${network}`);
    const after: MemberRecord = { ...structuredClone(before), id: to };
    const changes = [{ id, before, after: null }, { id: to, before: null, after }];
    return this.#commit(net, { version: 0, kind: 'members', changes }, () => {
      const sync = net.sync.get(id) ?? newSync();
      net.deleteMember(id);
      net.sync.delete(id);
      this.#store.deleteMember(net.record.name, id);
      this.#store.deleteSync(net.record.name, id);
      net.putMember(after);
      net.sync.set(to, sync);
      this.#store.putMember(net.record.name, after);
      this.#store.putSync(net.record.name, to, sync);
    });
  }

  updateMember(network: string, id: string, patch: Partial<Omit<MemberRecord, 'id'>>): number {
    const net = this.#net(network);
    const m = { ...this.#member(net, id), ...structuredClone(patch) };
    if (patch.tags) m.tags = sorted(patch.tags);
    // New settings fill the node's modules anew: settings its assigned modules name cannot go (declarable.ts).
    if (patch.settings) checkDeclarable(m, net.moduleOf);
    return this.#changeMember(net, id, m);
  }

  rotateKey(network: string, id: string, nodeKey: string): number {
    return this.updateMember(network, id, { nodeKey });
  }

  /**
   * The node's new tunnel key (a rotation, or a tunnel started after enrolment): a normal change,
   * so every peer that sees the node gets it in its next delta. The same key again changes nothing
   * (the current version is returned); '' withdraws it.
   */
  setTunnelKey(network: string, id: string, tunnelKey: string): number {
    const net = this.#net(network);
    const m = this.#member(net, id);
    if ((m.tunnelKey ?? '') === tunnelKey) return net.version;
    if (tunnelKey) checkTunnelKey(tunnelKey, net.members.values(), id);
    const after: MemberRecord = { ...structuredClone(m) };
    if (tunnelKey) after.tunnelKey = tunnelKey;
    else delete after.tunnelKey;
    return this.#changeMember(net, id, after);
  }

  setTags(network: string, id: string, tags: string[]): number {
    return this.updateMember(network, id, { tags });
  }

  /** A mode set without a preview: a converged node's agent flips only a machine with nothing to close. */
  setMode(network: string, id: string, mode: Mode): number {
    return this.#requested(network, id, this.updateMember(network, id, { mode, convergePreviewId: '' }));
  }

  /** The operator's flip: the node converged, to exactly this preview (record 003). */
  recordConverged(network: string, id: string, previewId: string): number {
    return this.#requested(network, id, this.updateMember(network, id, { mode: 'converged', convergePreviewId: previewId }));
  }

  /** Marks the version a change of mode was asked at: the node's transition is `requested` until its agent reports past it. */
  #requested(network: string, id: string, version: number): number {
    const net = this.#net(network);
    const sync = this.#sync(net, id);
    sync.requestedVersion = version;
    this.#putSync(net, id, sync, true);
    return version;
  }

  /** The declaration the node is sent now. */
  declarationOf(network: string, id: string): WireDeclaration {
    const net = this.#net(network);
    return declarationFor(this.#member(net, id), net.moduleOf);
  }

  assignModule(network: string, id: string, module: string): number {
    const net = this.#net(network);
    const m = this.#member(net, id);
    if (!net.moduleOf(module)) throw new MeshpError('MESHP_NOT_FOUND', `no module ${module} in the catalogue of ${network}: add it with meshp catalogue add`);
    checkAssigned(id, [...new Set([...m.assigned, module])].map((x) => net.record.modules[x]));
    checkNoClash({ ...m, assigned: sorted([...new Set([...m.assigned, module])]) }, net.moduleOf);
    // A declaration that could not be sent (a setting the node lacks) is refused here, never stored (declarable.ts).
    checkDeclarable({ ...m, assigned: sorted([...new Set([...m.assigned, module])]) }, net.moduleOf);
    return this.updateMember(network, id, { assigned: sorted([...new Set([...m.assigned, module])]) });
  }

  unassignModule(network: string, id: string, module: string): number {
    const m = this.#member(this.#net(network), id);
    return this.updateMember(network, id, { assigned: m.assigned.filter((x) => x !== module), taken: m.taken.filter((x) => x !== module) });
  }

  /** The module's cutover on this node; it must be assigned first. */
  takeModule(network: string, id: string, module: string): number {
    const net = this.#net(network);
    const m = this.#member(net, id);
    if (!m.assigned.includes(module)) throw new MeshpError('MESHP_USAGE', `module ${module} is not assigned to ${id}`);
    // An assignment stored before it was checked: its cutover is refused as its assignment would be now.
    checkDeclarable({ ...m, taken: sorted([...new Set([...m.taken, module])]) }, net.moduleOf);
    return this.updateMember(network, id, { taken: sorted([...new Set([...m.taken, module])]) });
  }

  setPolicy(network: string, rules: PolicyRule[]): number {
    checkPolicy(rules);
    const net = this.#net(network);
    const after = rules.map((r) => ({ from: r.from, to: r.to, ...(r.ports?.length ? { ports: [...r.ports] } : {}) }));
    return this.#commit(net, { version: 0, kind: 'policy', before: net.record.policy, after }, () => {
      net.record.policy = after;
      net.policy = new PolicyIndex(after);
    });
  }

  setComponent<K extends SharedComponentName>(network: string, name: K, value: SharedComponents[K]): number {
    const net = this.#net(network);
    const after = structuredClone(value);
    return this.#commit(net, { version: 0, kind: 'component', name, before: net.record.components[name], after }, () => {
      net.record.components = { ...net.record.components, [name]: after };
    });
  }

  defineModule(network: string, def: ModuleDef): number {
    checkModule(def);
    const net = this.#net(network);
    for (const m of net.members.values()) if (m.assigned.includes(def.name)) checkNoClash(m, (x) => (x === def.name ? def : net.moduleOf(x)));
    checkDefinable(def, net.members.values());
    const after = structuredClone(def);
    return this.#commit(net, { version: 0, kind: 'module', name: def.name, before: net.record.modules[def.name] ?? null, after }, () => {
      net.record.modules = { ...net.record.modules, [def.name]: after };
    });
  }

  /**
   * Several modules as one change to the store (catalogue add): all of them or none. Each is
   * checked before any is stored; a store that fails midway rolls back in one transaction, and
   * what the controller holds in memory is put back with it.
   */
  defineModules(network: string, defs: ModuleDef[]): number {
    for (const def of defs) checkModule(def);
    const net = this.#net(network);
    const saved = { record: structuredClone(net.record), log: [...net.log] };
    let version = net.record.version;
    try {
      this.#store.transaction(() => {
        for (const def of defs) version = this.defineModule(network, def);
      });
    } catch (e) {
      Object.assign(net.record, saved.record);
      net.log = saved.log;
      throw e;
    }
    return version;
  }

  /** The network's catalogue: every module defined, in name order (copies: the caller cannot change the record). */
  modules(network: string): ModuleDef[] {
    return Object.values(this.#net(network).record.modules).map((m) => structuredClone(m)).sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Forgets a module of the catalogue. One assigned to a node is refused (MESHP_MODULE_ASSIGNED,
   * naming the nodes): a node never keeps an assignment of a module that no longer exists.
   */
  removeModule(network: string, name: string): number {
    const net = this.#net(network);
    const before = net.record.modules[name];
    if (!before) throw new MeshpError('MESHP_NOT_FOUND', `no module ${name} in the catalogue of ${network}`);
    const holders = [...net.members.values()].filter((m) => m.assigned.includes(name)).map((m) => m.id).sort();
    if (holders.length) {
      throw new MeshpError('MESHP_MODULE_ASSIGNED', `module ${name} is assigned to ${holders.join(', ')}: unassign it from ${holders.length === 1 ? 'that node' : 'those nodes'} first (meshp module unassign NODE ${name} --yes); nothing was removed`, { details: { module: name, nodes: holders } });
    }
    return this.#commit(net, { version: 0, kind: 'module', name, before, after: null }, () => {
      const { [name]: _gone, ...rest } = net.record.modules;
      net.record.modules = rest;
    });
  }

  /** How many changes the network's log keeps for deltas. */
  logDepth(network: string): number {
    return this.#net(network).record.logDepth;
  }

  /** Keeps `depth` changes from now on (an agent further behind gets a snapshot); a shorter log is cut at once. */
  setLogDepth(network: string, depth: number): void {
    if (!Number.isInteger(depth) || depth < 1) throw new MeshpError('MESHP_USAGE', `a log depth is a whole number of changes, 1 or more, not ${depth}`);
    const net = this.#net(network);
    this.#store.transaction(() => {
      net.record.logDepth = depth;
      this.#truncate(net, depth, false);
      this.#store.putNetwork(net.record);
    });
  }

  /** Forgets all but the last `keep` changes (the log is also bounded by its depth on every change). */
  truncateLog(network: string, keep: number): void {
    const net = this.#net(network);
    this.#store.transaction(() => this.#truncate(net, keep));
  }

  // ---- tokens (tokens.ts) ---------------------------------------------------------------------

  createToken(network: string, options: { mode?: Mode; tags?: string[]; ttlSeconds?: number } = {}): TokenRecord {
    this.#net(network);
    checkTags(options.tags);
    return this.#tokens.create(network, options);
  }

  /** Joins with a one-time token: the mode comes from the token (record 003). */
  enrol(token: string, input: Omit<MemberInput, 'mode' | 'tags'>): { network: string; member: MemberRecord } {
    checkMember(input); // before the token is taken: a refused enrolment does not burn it
    const t = this.#tokens.take(token);
    this.join(t.network, { ...input, mode: t.mode, tags: t.tags });
    return { network: t.network, member: this.member(t.network, input.id)! };
  }

  // ---- the delta protocol (sync.ts) -------------------------------------------------------------

  /** What to send the node now (see `nextDelta`); null: nothing to send. */
  deltaFor(network: string, id: string): StateDelta | null {
    const net = this.#net(network);
    this.#member(net, id);
    const sync = this.#sync(net, id);
    const delta = nextDelta(net, id, sync, this.#now(), this.#keepSent);
    if (!delta) return null;
    this.#putSync(net, id, sync);
    delta.versionSignature = this.#signer ? this.#signer.sign(versionPayload(network, delta.toVersion, delta.stateHash ?? '')) : new Uint8Array(0);
    return delta;
  }

  /**
   * The nodes whose view the changes after version `since` may have changed (scope.ts), for the
   * fan-out; null: any node (a shared component, or a log that no longer reaches back).
   */
  affectedSince(network: string, since: number): Set<string> | null {
    const net = this.#net(network);
    const entries = net.since(since);
    return entries ? affectedBy(net, entries) : null;
  }

  /** The node's view at the current version and its hash, without touching its sync state. */
  snapshotOf(network: string, id: string): { delta: StateDelta; hash: string } {
    const c = computeSnapshot(this.#net(network), id);
    return { delta: c.delta, hash: stateHash(c.digest) };
  }

  /** Only an ack whose hash matches the one computed for its version moves the applied version. */
  ack(network: string, id: string, appliedVersion: number, hash: string): AckResult {
    const net = this.#net(network);
    const sync = this.#sync(net, id);
    const result = takeAck(sync, appliedVersion, hash);
    // An agent acks a version once it reconciled it, and reports before the ack only when its host's
    // facts changed: its last report stands for the version acked (an older agent reports again anyway).
    if (result.accepted && sync.reported && appliedVersion > sync.reported.version) sync.reported = { ...sync.reported, version: appliedVersion };
    if (!result.accepted && result.snapshotPending) snapshotAsked(sync, Date.parse(this.#now()), this.#resync, `ack of version ${appliedVersion} with another hash`);
    this.#putSync(net, id, sync);
    return { ...result, snapshotPending: sync.snapshotPending };
  }

  /**
   * When a snapshot held back by the backoff may go (epoch ms), or null; and why none goes at all.
   * A pending snapshot always has a time, even one already past: `deltaFor` read the clock a moment
   * before, and a hold that ran out in between (a timer fires up to a millisecond early; a busy
   * machine stretches the moment) must still be pumped again, never left without a timer.
   */
  snapshotHold(network: string, id: string): { retryAt: number | null; diverged: string | null } {
    const sync = this.#sync(this.#net(network), id);
    const at = sync.snapshotPending && !sync.diverged ? Math.max(sync.snapshotNotBefore ?? 0, Date.parse(this.#now())) : null;
    return { retryAt: at, diverged: sync.diverged ?? null };
  }

  /**
   * A new stream: resume from the agent's own version when its hash is the one expected, else
   * snapshot. An agent that applied a version this controller never reached means the controller
   * runs on an older copy of its state (restored from a backup): the versions after that copy,
   * which agents saw, belong to a history it no longer has. The network's version then moves past
   * the agent's and the change log is emptied — no delta bridges two histories — so this agent,
   * and every other as it asks, gets a snapshot newer than anything it holds (an agent never
   * goes back to an older version).
   */
  hello(network: string, id: string, appliedVersion: number, hash: string, versionSignature?: Uint8Array, revision?: number): AckResult {
    const net = this.#net(network);
    // A shared store: the node's stream may have been on another controller, whose record is the one
    // written; this one's is kept when it is as far (its stream was here: its basis may be further).
    const stored = this.#dirty.has(`${network}\u0000${id}`) ? undefined : this.#store.syncRecord?.(network, id);
    const mine = net.sync.get(id);
    if (stored && (!mine || stored.sent > mine.sent || stored.applied > mine.applied)) net.sync.set(id, stored);
    const sync = this.#sync(net, id);
    if (revision !== undefined && revision > 0) sync.revision = revision;
    checkAppliedVersion(appliedVersion);
    if (appliedVersion > net.version && this.#signer && !(versionSignature?.length && this.#signer.verify(versionPayload(network, appliedVersion, hash), versionSignature))) {
      throw new MeshpError('MESHP_VERSION_UNPROVEN', `${id} claims version ${appliedVersion} of ${network} (at ${net.version} here) without this controller's signature for it`);
    }
    const movedAhead = appliedVersion > net.version ? this.#moveAhead(net, appliedVersion) : undefined;
    // Its ack lost in a restart (group commit): the hello says it again, checked against the view now.
    const recovered = !movedAhead && recoverExpectation(net, id, sync, appliedVersion, hash);
    const result = takeHello(sync, appliedVersion, hash);
    if (recovered && result.accepted) sync.basis = net.version;
    if (!result.accepted && result.snapshotPending) snapshotAsked(sync, Date.parse(this.#now()), this.#resync, `hello at version ${appliedVersion} with another hash`);
    this.#putSync(net, id, sync);
    return movedAhead ? { ...result, movedAhead } : result;
  }

  /** The agent refused a delta or lost its view: the next answer is a snapshot. */
  resync(network: string, id: string): void {
    const net = this.#net(network);
    const sync = this.#sync(net, id);
    snapshotAsked(sync, Date.parse(this.#now()), this.#resync, 'the agent asked for a snapshot');
    this.#putSync(net, id, sync);
  }

  report(network: string, id: string, r: { firewallKind?: string; held?: number; changed?: number; reported?: ReportedState }): void {
    const net = this.#net(network);
    const sync = this.#sync(net, id);
    Object.assign(sync, { firewallKind: r.firewallKind ?? sync.firewallKind, held: r.held ?? sync.held, changed: r.changed ?? sync.changed, ...(r.reported ? { reported: r.reported } : {}) });
    this.#putSync(net, id, sync);
  }

  /** The tunnel handshakes of the node's last report, as kept (the next report carries since when it has had peers). */
  reportedHandshakes(network: string, id: string): ReportedHandshakes | undefined {
    return this.#net(network).sync.get(id)?.reported?.handshakes;
  }

  // ---- admin --------------------------------------------------------------------------------------

  /** A shared store: what other controllers committed, applied now (a node enrolled there a moment ago). */
  refresh(): void {
    this.#store.catchUp?.();
  }

  /**
   * A shared store: the sync records of the nodes whose streams are elsewhere (`here` says which are
   * on this controller) as their controller last wrote them, so a gap read here is theirs.
   */
  reloadSync(network: string, here: (id: string) => boolean): void {
    const net = this.#net(network);
    const ids = [...net.members.keys()].filter((id) => !here(id) && !this.#dirty.has(`${network}\u0000${id}`));
    if (ids.length === 0 || !this.#store.syncRecords) return;
    for (const [id, s] of this.#store.syncRecords(network, ids)) if (net.members.has(id)) net.sync.set(id, s);
  }

  /** Every membership with its convergence gap (state_version − applied_version). */
  listNodes(network: string): NodeStatus[] {
    return this.listNodesPage(network, '', Infinity).nodes;
  }

  /**
   * One page of listNodes, in its order (by id): the nodes after `after` ('' from the first), at most
   * `limit`; `next` is the page's last id when more follow, else ''. Only the page's statuses are computed.
   */
  listNodesPage(network: string, after: string, limit: number): { nodes: NodeStatus[]; next: string } {
    const net = this.#net(network);
    const ids = [...net.members.keys()].filter((id) => after === '' || id.localeCompare(after) > 0).sort((a, b) => a.localeCompare(b));
    const page = ids.slice(0, Math.max(1, limit));
    return { nodes: page.map((id) => statusOf(net, net.members.get(id)!, this.#checked(net, id))), next: ids.length > page.length ? page.at(-1)! : '' };
  }

  showNode(network: string, id: string): { node: NodeStatus; recentDeltas: SentSummary[] } {
    const net = this.#net(network);
    const sync = this.#checked(net, this.#member(net, id).id);
    return { node: statusOf(net, net.members.get(id)!, sync), recentDeltas: [...sync.recent] };
  }

  doctor(network: string, id: string): { node: NodeStatus; recentDeltas: SentSummary[]; expectedHash: string; hashMatches: boolean; snapshotPending: boolean; logFloor: number } {
    const net = this.#net(network);
    const { node, recentDeltas } = this.showNode(network, id);
    const sync = this.#sync(net, id);
    return { node, recentDeltas, expectedHash: sync.appliedHash, hashMatches: sync.lastAgentHash === sync.appliedHash, snapshotPending: sync.snapshotPending, logFloor: net.record.logFloor };
  }

  /**
   * Writes the sync records changed since the last flush, in one transaction; answers how many.
   *
   * The crash-safe rule of this group commit: a crash loses at most the sends and acks of the last
   * `syncFlushMs`, never a change (a change is committed at once with the records it creates). After
   * a restart an agent at most says its ack again: its hello carries its applied version and hash,
   * which the controller checks against the node's view now (`recoverExpectation`), so an agent that
   * was current resumes with no snapshot, and one that was behind gets its delta or a snapshot.
   */
  flushSync(): number {
    if (this.#flushTimer) clearTimeout(this.#flushTimer);
    this.#flushTimer = null;
    if (this.#dirty.size === 0) return 0;
    const items = [...this.#dirty.values()];
    this.#dirty.clear();
    let n = 0;
    this.#store.transaction(() => {
      for (const { net, id } of items) {
        const sync = net.sync.get(id);
        // A node removed (or renamed) since: its record went with the change.
        if (this.#networks.get(net.record.name) !== net || !sync || !net.members.has(id)) continue;
        this.#store.putSync(net.record.name, id, sync);
        n++;
      }
    });
    this.syncWrites.flushes++;
    this.syncWrites.records += n;
    return n;
  }

  close(): void {
    this.flushSync();
    this.#store.close();
  }

  // ---- internals ------------------------------------------------------------------------------------

  #changeMember(net: NetworkState, id: string, after: MemberRecord | null, fresh = false): number {
    const before = net.members.get(id) ?? null;
    return this.#commit(net, { version: 0, kind: 'member', id, before, after }, () => {
      if (after) {
        net.putMember(after);
        this.#store.putMember(net.record.name, after);
        if (fresh) {
          net.sync.set(id, newSync());
          this.#store.putSync(net.record.name, id, net.sync.get(id)!);
        }
      } else {
        net.deleteMember(id);
        net.sync.delete(id);
        this.#store.deleteMember(net.record.name, id);
        this.#store.deleteSync(net.record.name, id);
      }
    });
  }

  #commit(net: NetworkState, entry: LogEntry, apply: () => void): number {
    this.#store.transaction(() => {
      net.record.version += 1;
      const e = { ...entry, version: net.record.version } as LogEntry;
      net.log.push(e);
      apply();
      // Who it concerns, noted now (in memory: a restart counts every view as moved): the others are not looked at (sync.ts noteChange).
      noteChange(net, e.version - 1, e.version, affectedBy(net, [e]));
      this.#store.appendLog(net.record.name, e);
      // The record is put once, after the log's floor moved (it holds the policy: 200 rules at 10,000 nodes in groups of 50).
      this.#truncate(net, net.record.logDepth, false);
      this.#store.putNetwork(net.record);
    });
    return net.record.version;
  }

  /** The network's version moved to one past `seen`, its log emptied: every agent's next answer is a snapshot. */
  #moveAhead(net: NetworkState, seen: number): { from: number; to: number } {
    const from = net.record.version;
    this.#store.transaction(() => {
      net.record.version = seen + 1;
      net.touch(net.record.version, null);
      net.log = [];
      net.record.logFloor = net.record.version;
      this.#store.truncateLog(net.record.name, net.record.logFloor);
      this.#store.putNetwork(net.record);
    });
    return { from, to: net.record.version };
  }

  /** `put`: the network's record is written here (false: the caller writes it next, in the same transaction). */
  #truncate(net: NetworkState, keep: number, put = true): void {
    const drop = net.log.length - Math.max(0, keep);
    if (drop <= 0) return;
    net.log.splice(0, drop);
    net.record.logFloor = net.record.version - net.log.length;
    this.#store.truncateLog(net.record.name, net.record.logFloor);
    if (put) this.#store.putNetwork(net.record);
  }

  #net(name: string): NetworkState {
    const n = this.#networks.get(name);
    if (!n) throw new MeshpError('MESHP_NOT_FOUND', `no network ${name}`);
    return n;
  }

  #member(net: NetworkState, id: string): MemberRecord {
    const m = net.members.get(id);
    if (!m) throw new MeshpError('MESHP_NOT_FOUND', `no node ${id} in ${net.record.name}`);
    return m;
  }

  /** `durable`: written now (an operator's act); otherwise by the group commit (see `flushSync`). */
  #putSync(net: NetworkState, id: string, sync: SyncRecord, durable = false): void {
    const key = `${net.record.name}\u0000${id}`;
    if (durable || this.#syncFlushMs <= 0) {
      this.#dirty.delete(key);
      this.#store.transaction(() => this.#store.putSync(net.record.name, id, sync));
      return;
    }
    this.#dirty.set(key, { net, id });
    if (!this.#flushTimer) {
      this.#flushTimer = setTimeout(() => this.flushSync(), this.#syncFlushMs);
      this.#flushTimer.unref?.();
    }
  }

  /** The sync record with its target brought up to date (for the gap an operator reads). */
  #checked(net: NetworkState, id: string): SyncRecord {
    const s = this.#sync(net, id);
    refreshTarget(net, id, s);
    return s;
  }

  #sync(net: NetworkState, id: string): SyncRecord {
    let s = net.sync.get(id);
    if (!s) net.sync.set(id, (s = newSync()));
    return s;
  }
}

function sorted(xs: string[]): string[] {
  return [...new Set(xs)].sort();
}

function allocate(n: NetworkRecord): string {
  const [base, bits] = n.privateRange.split('/');
  const parts = (base ?? '100.96.0.0').split('.').map(Number);
  const start = ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
  const size = 2 ** (32 - Number(bits ?? 16));
  if (n.nextHost >= size - 1) throw new MeshpError('MESHP_USAGE', `the private range ${n.privateRange} is full`);
  const a = (start + n.nextHost++) >>> 0;
  return `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`;
}

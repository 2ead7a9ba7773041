/**
 * The whole plugin contract, in one file: the hooks a plugin taps (`HostHooks`), what it is handed
 * (`PluginHost`), and every object it may provide. It imports no implementation.
 *
 * Versioned: a plugin states the contract it was written against (`apiVersion`),
 * and the host refuses one it does not speak.
 */
import type { ContainerSpec, Declaration, Mode, Opening, Protocol, ResourceKind, ResourceState, TrafficPath } from './model.js';
import type { AsyncParallelHook, AsyncSeriesBailHook, AsyncSeriesHook, AsyncSeriesWaterfallHook, SyncHook } from 'tapable';
import type { PeerHandshake, Transport } from './agent/transport.js';
import type { Peer, StateDelta } from './delta/wire.js';

export const PLUGIN_API_VERSION = 1 as const;

/** Named stages for ordering taps; never `before`. */
export const STAGE = Object.freeze({
  FIRST: -100,
  RESOURCES: 0,
  OPENINGS: 10,
  CHECKS: 50,
  LAST: 100,
});

export interface Plugin {
  readonly name: string;
  readonly apiVersion: typeof PLUGIN_API_VERSION;
  apply(host: PluginHost): void;
}

/**
 * Every extension point of a host, in one screen. Firewall plugins record what they see in the
 * probe; each provider hook has one provider (two are `MESHP_PROVIDER_TWICE`); the rest are taps.
 */
export interface HostHooks {
  /** Each firewall plugin records what it sees in the probe, with a driver when it speaks it. */
  readonly firewall: AsyncSeriesHook<[FirewallProbe]>;
  /** One provider each. */
  readonly files: AsyncSeriesBailHook<[HostOptions], FileStore | undefined>;
  readonly runtime: AsyncSeriesBailHook<[HostOptions], ContainerRuntime | undefined>;
  readonly state: AsyncSeriesBailHook<[HostOptions], HostStateStore | undefined>;
  /** How the agent reaches its controller and the controller serves its agents. */
  readonly transport: AsyncSeriesBailHook<[HostOptions], Transport | undefined>;
  readonly facts: AsyncSeriesBailHook<[HostOptions], MachineFacts | undefined>;
  /** Plugins may add actions to the plan (they come with their own `run`). */
  readonly plan: AsyncSeriesWaterfallHook<[Plan, ApplyContext]>;
  /** A plugin may veto the whole plan with a reason (a string). */
  readonly beforeApply: AsyncSeriesBailHook<[Plan, ApplyContext], string | undefined>;
  readonly afterApply: AsyncParallelHook<[HostReport, ApplyContext]>;
  /** Plugins add facts to the node's report. */
  readonly report: AsyncSeriesWaterfallHook<[HostReport]>;
  /** The peers upserted, removed and unscoped by a delta, and the components that changed. */
  readonly viewChanged: SyncHook<[ViewChange]>;
  /**
   * The node leaves its network (removed by the controller, or `meshp agent leave`): each plugin
   * takes away what it added to the machine outside the firewall driver (a tunnel: its process, its
   * interface, its own table) and says so; never a found thing. `preview`: it only says.
   */
  readonly leave: AsyncSeriesHook<[Leaving]>;
}

/** What a `leave` tap is handed: say each thing removed (or, in a preview, to be removed) in `removed`, each left in place in `kept`. */
export interface Leaving {
  readonly preview: boolean;
  readonly removed: string[];
  readonly kept: string[];
}

/** What a plugin is handed: the hooks to tap, the host's options, and the parts other plugins provide. */
export interface PluginHost {
  readonly hooks: HostHooks;
  readonly options: HostOptions;
  files(): Promise<FileStore | null>;
  runtime(): Promise<ContainerRuntime | null>;
  facts(): Promise<MachineFacts | null>;
  transport(): Promise<Transport>;
  state(): Promise<HostStateStore>;
  firewall(): Promise<FirewallDriver | null>;
}

/** What a host was started with: the same options whether it runs as agent or as `meshp host`. */
export interface HostOptions {
  /** Prefix of every path the host reads or writes on the machine. Default "/". */
  root: string;
  /** The host's state folder. */
  stateDir: string;
  /** "auto" (detect) or a firewall kind to insist on. */
  firewall: string;
  /** Path of the container engine's socket. */
  dockerSocket?: string;
  /** Extra options for plugins, by plugin name. */
  pluginOptions?: Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// File store

export interface FileStat {
  bytes: Uint8Array;
  /** Permission bits, e.g. 0o644. */
  mode: number;
  /** Which file it is, whatever path reached it: "device:inode". */
  identity?: string;
}

export interface FileWriteOptions {
  /** The file the plan saw: its identity, or null for absent. A target that differs is refused (MESHP_FILE_SWAPPED). */
  expect?: string | null;
}

export interface FileStore {
  /** The root prefix every path lives under. */
  readonly root: string;
  /**
   * Absent → null. A path escaping the root is MESHP_PATH_ESCAPES_ROOT; one through a symlink,
   * or that is not a regular file, over the size limit, is refused with its own code.
   */
  read(path: string): Promise<FileStat | null>;
  /** Atomic: temp file, fsync, rename, fsync of the folder. Answers the identity of the file written, when known. */
  write(path: string, bytes: Uint8Array, mode: number, options?: FileWriteOptions): Promise<string | void>;
  remove(path: string, options?: FileWriteOptions): Promise<void>;
}

// ---------------------------------------------------------------------------------------------
// Container runtime

export interface PublishedPort {
  container: string;
  containerPort: number;
  hostPort: number;
  hostIp: string;
  protocol: Protocol;
}

export interface ContainerInfo {
  name: string;
  id: string;
  image: string;
  state: string;
  labels: Record<string, string>;
  ports: PublishedPort[];
}

export interface ContainerMark {
  node: string;
  module: string;
  /** Hash of the spec; the `meshp.spec-hash` label. */
  specHash: string;
}

export const LABEL_MODULE = 'meshp.module';
export const LABEL_SPEC_HASH = 'meshp.spec-hash';
export const LABEL_NODE = 'meshp.node';

export interface ContainerRuntime {
  list(): Promise<ContainerInfo[]>;
  /** The container and its whole inspect document (kept as the original of a found one), or null. */
  inspect(name: string): Promise<{ info: ContainerInfo; document: unknown } | null>;
  /** Create, or replace when the running one differs; labelled with the mark. Rolls back a failed start. */
  ensure(spec: ContainerSpec, mark: ContainerMark): Promise<void>;
  /** Removes a container. The reconciler only ever asks this for the host's own. */
  remove(name: string): Promise<void>;
  publishedPorts(): Promise<PublishedPort[]>;
}

// ---------------------------------------------------------------------------------------------
// Firewall

/**
 * Handed to every firewall plugin in turn. Each records what it saw, with a driver when it speaks
 * that kind. The host then chooses: the kind asked for, or the one active kind; an active kind with
 * no driver, or several active kinds, is refused, naming what was seen. Never a guess.
 */
export interface FirewallProbe {
  readonly requested: string; // "auto" or a kind
  readonly root: string;
  /** What each plugin saw: an active firewall that no plugin answers for makes adoption refused, naming these. */
  seen: FirewallSighting[];
}

export interface FirewallSighting {
  kind: string;
  active: boolean;
  summary: string;
  by: string; // plugin name
  /** Present when the plugin speaks this kind. */
  driver?: FirewallDriver;
}

export interface FirewallDescription {
  kind: string;
  /** Who manages it (e.g. "nftables.service", "netfilter-persistent", "ufw", "none"). */
  manager: string;
  active: boolean;
  tables: string[];
  /** The config file it loads from, if known (inside the root prefix). */
  configFile?: string;
  /** A few lines an operator reads: what allows, what drops. */
  summary: string[];
}

/** The mesh's own table on a converged node: drop by default, established allowed, these allowed. */
export interface DerivedFilter {
  openings: Opening[];
  refusals: Opening[];
  privateRange?: string;
}

/** What `retire` did, kept by the host so `reenable` can undo it. Opaque to core. */
export type RetiredState = Record<string, unknown>;

export interface EnsureResult {
  added: string[]; // opening ids
  removed: string[];
  /** Openings the driver left no place for (nothing of them written): id and a coded one-line reason. */
  refused?: { id: string; reason: string }[];
}

export interface FirewallDriver {
  readonly kind: string;
  describe(): Promise<FirewallDescription>;
  /** The openings and refusals present that carry the mesh's mark. */
  openings(): Promise<Opening[]>;
  /** One transaction per backend: add what is missing, remove what is marked and unwanted; never touch an unmarked rule. */
  ensure(openings: Opening[], refusals: Opening[]): Promise<EnsureResult>;
  loadDerived(filter: DerivedFilter): Promise<void>;
  unloadDerived(): Promise<void>;
  /** Disables the found firewall without flushing; its configuration stays on disk. */
  retire(): Promise<RetiredState>;
  reenable(state: RetiredState): Promise<void>;
  /** Optional: call back when the firewall was reloaded by someone else. */
  watch?(onChange: () => void): { close(): void };
  /**
   * Optional: where each door is reachable from through the live ruleset as it is now (one read
   * of the ruleset per call), one answer per door in the order asked. An approximation each
   * plugin's README bounds; a driver without it makes the preview say `unknown`. `explain`: each
   * answer also names the rules that drop (`droppedBy`) and those the walk cannot read (`unread`).
   */
  reachability?(doors: Door[], options?: { explain?: boolean }): Promise<Reach[]>;
}

/** A port on a path as a firewall sees it: a listening socket is `incoming`, a published container port `forwarded`. */
export interface Door {
  port: number;
  protocol: Protocol;
  path: TrafficPath;
  /** Forwarded: the port the packet carries after Docker's DNAT (the container's), when known. */
  targetPort?: number;
}

/** `open`: from anywhere; `open-from`: only from `from`; `closed`: from nowhere. */
export type ReachNow = 'open' | 'open-from' | 'closed';

export interface Reach {
  port: number;
  protocol: Protocol;
  path: TrafficPath;
  now: ReachNow;
  /** `open-from`: the source ranges the accepting rules name (canonical CIDRs). */
  from?: string[];
  /** Whether a rule of the found firewall (not one of the mesh's own) names this port on this path. */
  mentioned: boolean;
  /** The rules that drop some of the door's new connections (a policy drop counts), with the sources they drop. */
  droppedBy?: { rule: string; from: string[]; partial?: boolean }[];
  /** Rules the walk cannot read that may drop some of them: the answer is not certain for these sources. */
  unread?: { rule: string; from: string[] }[];
}

// ---------------------------------------------------------------------------------------------
// Machine facts: what is reachable on the machine now (for genesis and the converge preview)

export interface Listener {
  protocol: Protocol;
  /** The bound address; 0.0.0.0 or :: for every interface. */
  address: string;
  port: number;
  family: 4 | 6;
  /** The process holding the socket, when it can be seen. */
  process?: string;
  pid?: number;
  /** TCP: connections established to it now from another machine (loopback peers not counted). Absent: none, or not known. */
  established?: number;
}

export interface MachineFacts {
  listening(): Promise<Listener[]>;
  /** Addresses and routes the machine has, by interface (for the private range's overlap check). */
  addresses(): Promise<{ interface: string; cidr: string }[]>;
}

// ---------------------------------------------------------------------------------------------
// Host state store

export interface OwnedRecord {
  key: string;
  kind: ResourceKind;
  module: string;
  /** Digest of what the host wrote, in the handler's terms. */
  digest: string;
  at: string;
  /** Which file the host wrote ("device:inode"), whatever path reaches it; files only. */
  identity?: string | null;
}

export interface OriginalRecord {
  key: string;
  kind: ResourceKind;
  module: string;
  /** The found resource as it was before anything touched it (file bytes; container inspect JSON). */
  original: Uint8Array;
  fingerprint: string;
  foundAt: string;
  /** Last fingerprint seen while held; differs from `fingerprint` when changed by something else. */
  lastFingerprint: string | null;
  changedAt: string | null;
  /** Which file was found ("device:inode"), as last seen; files only. */
  identity?: string | null;
}

export interface IntentRecord {
  key: string;
  kind: ResourceKind;
  module: string;
  digest: string;
  at: string;
}

export interface StoredReport {
  at: string;
  report: HostReport;
}

export interface HostStateStore {
  getOwned(key: string): Promise<OwnedRecord | null>;
  listOwned(): Promise<OwnedRecord[]>;
  getOriginal(key: string): Promise<OriginalRecord | null>;
  listOriginals(): Promise<OriginalRecord[]>;
  listIntents(): Promise<IntentRecord[]>;
  /** Committed durably before it returns: nothing may touch the resource until then. */
  recordOriginal(rec: OriginalRecord): Promise<void>;
  /** `identity`, when given, replaces the recorded one (a held file an editor saved anew is another inode). */
  noteSeen(key: string, fingerprint: string | null, at: string, identity?: string | null): Promise<void>;
  /** Written before the host changes a resource, so a crash mid-write is recognised on restart. */
  recordIntent(rec: IntentRecord): Promise<void>;
  /** Records the resource as the host's own and clears its intent, in one transaction. */
  recordOwned(rec: OwnedRecord): Promise<void>;
  clearIntent(key: string): Promise<void>;
  forgetOwned(key: string): Promise<void>;
  getValue<T>(name: string): Promise<T | null>;
  setValue(name: string, value: unknown): Promise<void>;
  saveReport(report: HostReport): Promise<void>;
  lastReports(n: number): Promise<StoredReport[]>;
  close(): Promise<void>;
  /** Optional: the agent's view kept per peer, written in the size of a delta, in one transaction (core/src/agent/view-store.ts). */
  saveView?(w: ViewWrite): Promise<void>;
  /** The view kept by `saveView`, as a snapshot of its version; null when none was kept. */
  loadView?(): Promise<StateDelta | null>;
}

/** What one applied delta changed in the agent's view, for a store that keeps it per peer. */
export interface ViewWrite {
  network: string;
  version: number;
  /** The whole view: what the store held of it before goes. */
  full: boolean;
  upsert: Peer[];
  /** Peer ids gone from the view (removed or unscoped). */
  remove: string[];
  /** Components by name, each its value now (null: absent). */
  components: Record<string, unknown>;
  /** Other records written in the same transaction, by name (null deletes). */
  values: Record<string, unknown>;
}

// ---------------------------------------------------------------------------------------------
// The plan and the report

export type ActionOp =
  | 'create' // absent: make it
  | 'converge' // the host's own (or taken): make it match
  | 'hold' // found, kept as it is
  | 'keep' // nothing to do
  | 'remove' // the host's own, no longer declared
  | 'release' // held or with a kept original, no longer declared: left in place
  | 'refuse';

export interface Action {
  key: string;
  kind: ResourceKind;
  module: string;
  op: ActionOp;
  /** What the resource's state will be once the action is done. */
  state: ResourceState;
  reason?: string;
  /** The declared spec, for create / converge. */
  spec?: unknown;
  /** Set by the reconciler: true when the resource exists but no record says the host wrote it. */
  found?: boolean;
  /** Supplied by the plugin that added the action, for actions core does not know how to apply. */
  run?: () => Promise<void>;
  by?: string;
}

export interface Plan {
  node: string;
  mode: Mode;
  actions: Action[];
  /** Openings and refusals the firewall will be asked to ensure. */
  firewall: { openings: Opening[]; refusals: Opening[]; kind: string | null };
}

export interface ResourceReport {
  key: string;
  kind: ResourceKind;
  module: string;
  state: ResourceState;
  reason?: string;
}

export interface HostReport {
  node: string;
  mode: Mode;
  at: string;
  firewall: { kind: string; active: boolean; summary: string[] } | null;
  resources: ResourceReport[];
  counts: Record<ResourceState, number>;
  appliedVersion?: number;
  /** Plugins add facts here through the `report` hook (listening sockets, published ports, …). */
  facts: Record<string, unknown>;
  /**
   * A tunnel plugin's peers with their latest handshakes, read in the `report` hook ([]: none
   * configured). The agent sends them in its report; absent: no tunnel plugin reads them.
   */
  handshakes?: PeerHandshake[];
}

export interface ApplyContext {
  declaration: Declaration;
  plan: Plan;
  preview: boolean;
}

/** What a delta changed in the node's view, for consumers (tunnels, DNS). */
export interface ViewChange {
  fromVersion: number;
  toVersion: number;
  upserted: string[];
  /** Peers gone from the network: tear down. */
  removed: string[];
  /** Peers out of this node's scope: they still exist, only this node may no longer see them. */
  unscoped: string[];
  components: string[];
}

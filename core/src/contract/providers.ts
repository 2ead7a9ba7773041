/**
 * What a plugin may provide the host, one section per provider hook: the file store, the container
 * runtime, the firewall (probe, sighting, driver, reach), the machine's facts and the host's state
 * store. The hooks that ask for them are in plugin.ts; the plan they act on is in plan.ts.
 */
import type { ContainerSpec, Opening, Protocol, ResourceKind, RouteForward, TrafficPath } from './model.js';
import type { Peer, StateDelta } from './wire.js';
import type { HostReport } from './plan.js';

// ---------------------------------------------------------------------------------------------
// File store

export interface FileStat {
  bytes: Uint8Array;
  /** Permission bits, e.g. 0o644. */
  mode: number;
  /** Which file it is, whatever path reached it: "device:inode". */
  identity?: string;
  /** Its owner, when the store can tell (kept with an original, put back by untake). */
  uid?: number;
  gid?: number;
}

export interface FileWriteOptions {
  /** The file the plan saw: its identity, or null for absent. A target that differs is refused (MESHP_FILE_SWAPPED). */
  expect?: string | null;
  /** The owner to give the file written (untake puts an original back with its owner). */
  owner?: { uid: number; gid: number };
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
  /** Optional: keeps the image of a found container (its inspect document) from garbage collection, by a tag the mesh owns. */
  keepImage?(document: unknown): Promise<void>;
  /** Optional: whether a recorded container (its inspect document) can be recreated as it was, and what stands in the way. */
  restorable?(document: unknown): Promise<Restorability>;
  /** Optional: recreates a recorded container from its inspect document under its name (its volumes reattached), started if it ran. */
  restore?(document: unknown): Promise<void>;
}

/** What a runtime says of a recorded container before it is recreated (untake). */
export interface Restorability {
  /** The image by id: present, or gone (nothing is pulled). */
  image: 'present' | 'gone';
  imageId: string;
  /** The reference it was made from (e.g. `lab/web:1`), and whether it still names that image. */
  reference: string;
  referenceMoved: boolean;
  /** Named volumes it used that are no longer there. */
  volumesGone: string[];
  /** Its volumes (named and anonymous), reattached when it is recreated. */
  volumes: string[];
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
  /** A router's forwarded paths (issue 26): allowed through the derived forward chain, masqueraded when asked. */
  forwards?: RouteForward[];
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
  ensure(openings: Opening[], refusals: Opening[], forwards?: RouteForward[]): Promise<EnsureResult>;
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
  /** True when the host made it where nothing was; false when it was found; null: not recorded (a record from before). */
  made?: boolean | null;
}

/** What is kept of a found file besides its bytes: its mode and owner. */
export interface OriginalMeta {
  mode?: number;
  uid?: number;
  gid?: number;
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
  /** Its mode and owner when found (files); null: not recorded (a record from before). */
  meta?: OriginalMeta | null;
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

/**
 * The host's records (ADR 0005). A write that fails leaves what was recorded before it as it was, and
 * is refused by its condition: MESHP_STORE_FULL (no room), MESHP_STATE_CORRUPT (the store is
 * damaged), MESHP_STATE_LOCKED (in use elsewhere); the reconciler then stops its apply.
 */
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
  /**
   * After untake put a found resource back, in one transaction: it is no longer the host's own, and is held again as now
   * seen (its original's fingerprint and identity follow what is there; unchanged since). The original's bytes stay.
   */
  refound(key: string, fingerprint: string, identity: string | null): Promise<void>;
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

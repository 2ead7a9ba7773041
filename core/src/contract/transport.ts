/**
 * The transport contract: how an agent talks to its controller and how a controller serves its
 * agents and operators, whatever carries the bytes. `@meshp/transport-grpc` is one implementation.
 * Shapes follow `proto/meshp/v1/control.proto` as ts-proto reads it (camelCase, enums as numbers).
 */
import type { Mode, Opening } from './model.js';
import type { PeerHandshake, ResourceReport } from './plan.js';

// Named here too: a peer's handshake is part of the report a transport carries.
export type { PeerHandshake } from './plan.js';
import type { StateDelta } from './wire.js';
import type { AdminHandler } from './admin.js';

/** The largest message either end accepts; more is refused (NetBird shipped 4.2 MB maps over gRPC's 4 MB default). */
export const DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024;
/**
 * The protocol revision this end speaks (v1-r5: a route group's no_masquerade, issue 26; v1-r4: the relays' transport and credentials, issue 27; v1-r3: the DNS component's domain, splits and CNAMEs, issue 25):
 * the agent's Hello says it, the controller hashes for older ones (delta/revision.ts).
 */
export const PROTOCOL_REVISION = 5;

export interface EnrolInput {
  token: string;
  /** The node's Ed25519 public key (SPKI DER, base64). */
  nodeKey: string;
  node: string;
  endpoints: string[];
  /** The node's WireGuard public key (base64), when it runs a tunnel plugin. */
  tunnelKey?: string;
}

export interface EnrolResult {
  network: string;
  node: string;
  /** The credential the agent presents in every Hello. */
  credential: string;
  mode: Mode;
  addresses: string[];
}

export interface HelloMessage {
  node: string;
  credential: string;
  appliedVersion: number;
  stateHash: string;
  revision: number;
  /** Signature by the node key over `challengePayload(node, nonce)`. */
  signature: Uint8Array;
  /** The controller's signature of the version applied (StateDelta.version_signature), when kept. */
  versionSignature?: Uint8Array;
  /** issue 28: the agent takes `expiry` and `rekey` messages (an older one is sent neither). */
  expiryAware?: boolean;
  /** The exit node the agent asks to use (`meshp agent --exit-node NAME`, ADR 0039); absent or '': none. */
  exitNode?: string;
}

export interface AckMessage {
  appliedVersion: number;
  stateHash: string;
}

export interface ResyncMessage {
  appliedVersion: number;
  reason: number;
  detail: string;
}

export interface ReportMessage {
  appliedVersion: number;
  mode: Mode;
  firewallKind: string;
  firewallActive: boolean;
  resources: ResourceReport[];
  at: string;
  /** The last deltas applied, for doctor to match with what was sent. */
  applied?: { fromVersion: number; toVersion: number; stateHash: string }[];
  /** What is reachable on the machine now (for the converge preview). */
  listening?: { protocol: string; address: string; port: number; process: string; pid?: number; established?: number }[];
  published?: { container: string; hostPort: number; containerPort: number; protocol: string; hostIp: string }[];
  /** The found firewall's tables and config file (with its kind and activity above): what a preview needs. */
  firewallTables?: string[];
  firewallConfigFile?: string;
  /** Where the node is in its lifecycle: a flip or a return running, done, or refused. */
  lifecycle?: LifecycleReport;
  /** Where each door (listening socket, published port) is reachable from now, as the firewall driver answered. Absent: not known. */
  reach?: { port: number; protocol: string; path: string; now: string; from: string[]; mentioned: boolean }[];
  /** The last reconcile's result: a refused one (an invalid declaration, a plugin that failed) says so. Absent: an older agent. */
  reconcile?: ReconcileOutcome;
  /** The node's WireGuard public key now, when it runs a tunnel: another than the stored one is a key change. */
  tunnelKey?: string;
  /** The tunnel's interface, when it runs one. */
  tunnelInterface?: string;
  /** Why the tunnel is not up (a MESHP code and why); absent when it is, or when none runs. */
  tunnelError?: string;
  /** The openings its plugins add to its converged plan (the converge preview counts them). Absent: none, or an older agent. */
  pluginOpenings?: Opening[];
  /** The changes its plugins add to its converged plan beyond openings (a resolv.conf to write): the converge preview lists them. Absent: none, or an older agent. */
  pluginChanges?: PlannedChange[];
  /** Each tunnel peer's latest handshake, when the agent runs a tunnel that reads them ([]: no peer). Absent: not reported. */
  peerHandshakes?: PeerHandshake[];
  /** The mesh's resolver on the node (issue 25), when the agent runs one. Absent: none, or an older agent. */
  dns?: ResolverReport;
  /** The prefixes the node offers to route (issue 26: `--advertise-route`), approved or not by an admin. Absent: none. */
  advertisedRoutes?: string[];
  /** issue 27: the node's relayed transport address (IP:PORT) on its allocation on relay `relayId`. Absent: none, or an older agent. */
  relayedAddress?: string;
  relayId?: string;
  /** A router's forwarding sysctls as its tunnel plugin read them (issue 26). Absent: no tunnel, or an older agent. */
  forwarding?: ForwardingReport;
  /** issue 29: each taken module's untake preview on an adopted node, as the agent computed it. Absent: none, or an older agent. */
  untakePreviews?: UntakePreviewReport[];
  /** issue 29: the untakes the controller asked, each as the agent ended it. */
  untakes?: UntakeOutcomeReport[];
  /** issue 29: each assigned, untaken module's release --restore preview, as the agent computed it. */
  releasePreviews?: UntakePreviewReport[];
}

/** A router's forwarding: found, held (off on an adopted node), or turned on with its original recorded. */
export interface ForwardingReport {
  state: 'none' | 'found-on' | 'held' | 'owned';
  /** Sysctl name → its value now ('' : the machine has none). */
  values: Record<string, string>;
  /** Sysctl name → what was recorded before meshp changed it. */
  original: Record<string, string>;
  reason: string;
  /** The sysctls the prefixes it serves need on ([]: not a router). */
  needed: string[];
}

/**
 * A change a plugin adds to a node's converged plan that is no opening (core/src/lifecycle/preview-changes.ts):
 * a file it writes, a manager's entry. Words throughout, as the wire carries them.
 */
export interface PlannedChange {
  /** The resource: `file:/etc/resolv.conf`. */
  key: string;
  kind: string;
  module: string;
  /** The plugin that adds it. */
  by: string;
  /** create | converge | remove | release. */
  op: string;
  reason: string;
  /** A hash of what it writes (its spec): another content to write is another change, and another preview id. */
  digest: string;
}

/** An untake preview as the report carries it (core/src/reconcile/untake-rule.ts' UntakePlan, less its node). */
export interface UntakePreviewReport {
  module: string;
  id: string;
  steps: { key: string; kind: string; op: string; what: string }[];
  blocks: { key: string; code: string; reason: string; diff: string }[];
}

export interface UntakeOutcomeReport {
  module: string;
  previewId: string;
  result: 'done' | 'refused';
  code: string;
  message: string;
  at: string;
  /** A release --restore's outcome, not an untake's. */
  release?: boolean;
}

/** The mesh's resolver as its plugin says (the dns-resolver plugin's status, less its counters by outcome). */
export interface ResolverReport {
  /** '' : not answering (`lastError` says why). */
  address: string;
  port: number;
  domain: string;
  names: number;
  upstreams: string[];
  upstreamsFrom: 'component' | 'found' | 'none';
  lastError: string | null;
  lastAnswerError: string;
  queries: number;
  /** The machine's resolver manager (core/src/lifecycle/resolver-managers.ts' kinds); '' : an older agent. */
  manager: string;
  /** Whether the machine's resolver asks the mesh's, through the manager (a per-link entry) or a managed file. */
  integrated: boolean;
  /** How, or why not, in one line: `through resolvconf: tun-meshp0.meshp …`, `the resolver configuration is held (…)`. */
  integration: string;
}

export interface ReconcileOutcome {
  result: 'ok' | 'refused';
  code: string;
  message: string;
  at: string;
  refusedResources: number;
}

export type LifecycleState = 'adopted' | 'flipping' | 'converged' | 'refused' | 'returning';

export interface LifecycleReport {
  state: LifecycleState;
  /** The preview the flip applied, or was refused for ('' when none was given). */
  previewId: string;
  /** The steps done so far, in order. */
  steps: string[];
  /** Why it was refused. */
  code?: string;
  message?: string;
  at: string;
}

/** Agent → controller on the Sync stream. */
export type AgentMessage =
  | { hello: HelloMessage }
  | { ack: AckMessage }
  | { report: ReportMessage }
  | { resync: ResyncMessage }
  /** issue 28 (ADR 0041): the credential renewed, asked once `CredentialExpiry.renewAt` has come. */
  | { renew: Record<string, never> };

/** When the node's credential expires, and when its agent asks a renewal (a third of its term before). */
export interface CredentialExpiry {
  expiresAt: string;
  renewAt: string;
}

/** Controller → agent on the Sync stream. The challenge comes first, before anything else. */
export type ControllerMessage =
  | { challenge: Uint8Array }
  | { delta: StateDelta }
  | { error: { code: string; message: string } }
  | { expiry: CredentialExpiry }
  /** issue 28: make a new tunnel key and report it (meshp node rekey). */
  | { rekey: { id: string } };

/** One end of one Sync stream. */
export interface SyncChannel<In, Out> {
  send(message: Out): void;
  onMessage(listener: (message: In) => void): void;
  /** Called once, when the stream ends; `error` says why when it did not end cleanly. */
  onClose(listener: (error?: TransportError) => void): void;
  close(error?: TransportError): void;
}

/** Why a call or a stream ended: a stable code (MESHP_…, or the transport's own) and a message. */
export interface TransportError {
  code: string;
  message: string;
}

/** The agent's side. */
export interface ControlLink {
  enrol(input: EnrolInput): Promise<EnrolResult>;
  sync(): SyncChannel<ControllerMessage, AgentMessage>;
  close(): void;
}

export interface ConnectOptions {
  /** HOST:PORT of the controller. */
  address: string;
  /** SHA-256 of the controller's certificate (hex): anything else is refused. */
  fingerprint: string;
  maxMessageBytes?: number;
}

/** The controller's side of the Control service. `peer` names the remote end, for logs. */
export interface ControlHandlers {
  enrol(input: EnrolInput, peer: string): Promise<EnrolResult>;
  sync(channel: SyncChannel<AgentMessage, ControllerMessage>, peer: string): void;
  /** Called with the encoded size (bytes on the wire, framing aside) of every state delta written on a Sync stream. */
  deltaBytes?(bytes: number): void;
}

/** The Admin service, by method name: typed per method through an admin map (contract/admin.ts). */
export type { AdminHandler };

/** A call or stream the transport refused before a handler saw it (an oversized message). */
export type Refused = (r: { method: string; peer: string; code: string; message: string }) => void;

/** An answer the transport could not encode (the call ends with an internal error): which method, why, and whose delta when it was one. */
export type Unencodable = (r: { method: string; message: string; network?: string; node?: string }) => void;

export interface ListenOptions {
  /** HOST:PORT; port 0 picks a free one. */
  address: string;
  certPem: string;
  keyPem: string;
  maxMessageBytes?: number;
}

export interface TransportListener {
  /** HOST:PORT actually bound. */
  readonly address: string;
  close(): Promise<void>;
}

export interface Transport {
  readonly name: string;
  connect(options: ConnectOptions): ControlLink;
  listen(
    options: ListenOptions,
    services: { control: ControlHandlers; admin: AdminHandler; refused?: Refused; unencodable?: Unencodable },
  ): Promise<TransportListener>;
}

/** What the node key signs at the start of every stream. */
export function challengePayload(node: string, nonce: Uint8Array): Uint8Array {
  const head = new TextEncoder().encode(`meshp-sync-v1\u0000${node}\u0000`);
  const out = new Uint8Array(head.length + nonce.length);
  out.set(head);
  out.set(nonce, head.length);
  return out;
}

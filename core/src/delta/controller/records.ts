import type { Mode, ModuleDecl, Settings } from '../../contract/model.js';
import type { StoredDigest } from '../hash.js';
import type { Dns, RouteGroups as RouteGroupList } from '../../contract/wire.js';
import type { StoredRelays } from './relays.js';

/** A node's membership of a network, as the controller keeps it. */
export interface MemberRecord {
  id: string;
  nodeKey: string;
  addresses: string[];
  tags: string[];
  endpoints: string[];
  mode: Mode;
  assigned: string[];
  taken: string[];
  settings: Settings;
  /** The preview the operator's flip was recorded with ('' or absent: none). Only meaningful when converged. */
  convergePreviewId?: string;
  /**
   * The node's WireGuard public key (base64), given at enrolment or changed since; absent: it runs no
   * tunnel. A record stored before the field existed reads as absent, so no stored row needs rewriting.
   */
  tunnelKey?: string;
  /** Where the controller saw this tunnel node's Sync stream come from, on its tunnel port (`IP:PORT`): an endpoint after the told ones. */
  observedEndpoint?: string;
  /**
   * issue 27: the endpoint a control-node's WireGuard device sends this node's tunnel to, as that
   * control-node's agent reported it with a fresh handshake: the node's NAT mapping of its tunnel port
   * (wgsd-style). An endpoint after the told ones, before the observed one.
   */
  mappedEndpoint?: string;
  /** issue 27: the node's relayed transport address on its relay allocation, as its agent reported it: its peers' last candidate. */
  relayedEndpoint?: string;
  /** issue 29: modules untaken through the controller, by name, each with the preview id the operator saw (absent: none). */
  untaking?: Record<string, string>;
  /** issue 29: modules released with --restore (no longer assigned), each with the preview id the operator saw. */
  releasing?: Record<string, string>;
  /**
   * issue 28 (ADR 0041): when the node's credential expires (ISO time), set at enrolment from the
   * network's node lifetime and moved by each renewal. Absent: it never expires (a control-node, or
   * a node enrolled before expiry existed, until its first renewal).
   */
  expiresAt?: string;
  /** Since when the term that ends at expiresAt runs (its enrolment or last renewal): its agent renews a third of the term before the end. */
  renewedAt?: string;
  /**
   * When the controller recorded the node expired (ISO time): from then every peer treats it as
   * removed for traffic (out of its view: its filter and allowed IPs drop it) while it stays a
   * member. Absent: not expired. A renewal takes it away, in one version.
   */
  expiredAt?: string;
  /**
   * issue 28 (ADR 0042): enrolled with an ephemeral token: removed (as `node remove`) once it has had
   * no stream for this many seconds. Absent: kept until removed. Not in any peer's view.
   */
  ephemeralSeconds?: number;
}

/** Members tagged `from` may reach members tagged `to`. */
export interface PolicyRule {
  from: string;
  to: string;
  ports?: string[];
}

/** A policy test as stored: `from`/`to` a node's name or `tag:NAME`, `port` "80/tcp". */
export interface PolicyTestRecord {
  from: string;
  to: string;
  port: string;
  expect: 'accept' | 'deny';
}

/** A module of the catalogue: what it declares (its `taken` flag is per node). */
export type ModuleDef = Omit<ModuleDecl, 'taken'>;

/** Network-wide components, the same for every node. */
export interface SharedComponents {
  dns: Dns;
  /** issue 27: the relays, their secrets and when the credentials in force were minted (relays.ts). */
  relays: StoredRelays;
  /**
   * The route groups, and each group's primary as the controller last chose it (issue 26: kept while
   * that via node is connected, so a via node coming back does not take its prefixes back).
   */
  routeGroups: RouteGroupList & { primaries?: Record<string, string>; exits?: Record<string, ExitChoice> };
}

/**
 * Which exit node a node asks to use (issue 26, ADR 0039): the admin's setting (`meshp node exit-node`:
 * a group's name, or OFF) wins over the agent's (`meshp agent --exit-node`, from its Hello). Each exit
 * group stored carries the members that use it (`exitUsers`), recomputed from these whenever the
 * component is stored: the scope and the deltas read only the group.
 */
export interface ExitChoice {
  admin?: string;
  agent?: string;
}

/** The admin's setting that a node uses no exit node, whatever its agent asks. */
export const EXIT_OFF = '-off';
export type SharedComponentName = keyof SharedComponents;

export interface NetworkRecord {
  name: string;
  /** Bumped by every change. */
  version: number;
  /** The log holds the changes of versions (logFloor, version]. */
  logFloor: number;
  logDepth: number;
  policy: PolicyRule[];
  /** The policy file's tests, run on every `policy set` (issue 28). Absent: none. */
  policyTests?: PolicyTestRecord[];
  /** The state version that set the policy in force (issue 28). Absent: never set, or set before it was recorded. */
  policyVersion?: number;
  components: SharedComponents;
  modules: Record<string, ModuleDef>;
  privateRange: string;
  /**
   * What carries the private network: `tunnel` (genesis without --private-interface: every member
   * raises a WireGuard tunnel, and one without is flagged) or `interface` (a network the machines
   * share already). Absent: not said (a network made by an older genesis, or without one).
   */
  privateNetwork?: 'tunnel' | 'interface';
  nextHost: number;
  /**
   * The scope rule the members' views were computed with (sync.ts SCOPE_RULE). Absent: 1, written
   * before the control-node was in every member's view; a controller loading it checks each view once.
   */
  scopeRule?: number;
  /** issue 28 (ADR 0041): how long a node's credential lives from its enrolment or renewal, in seconds. Absent: NODE_LIFETIME_S (180 days). */
  nodeLifetimeSeconds?: number;
}

/** The node lifetime of a network that sets none: 180 days (ADR 0041), Tailscale's default key expiry. */
export const NODE_LIFETIME_S = 180 * 86400;

export type LogEntry =
  | { version: number; kind: 'member'; id: string; before: MemberRecord | null; after: MemberRecord | null }
  /** Several memberships changed in one version (a rename: the old name gone, the new one there). */
  | { version: number; kind: 'members'; changes: { id: string; before: MemberRecord | null; after: MemberRecord | null }[] }
  | { version: number; kind: 'policy'; before: PolicyRule[]; after: PolicyRule[] }
  | { version: number; kind: 'component'; name: SharedComponentName; before: unknown; after: unknown }
  | { version: number; kind: 'module'; name: string; before: ModuleDef | null; after: ModuleDef | null };

/** What the controller sent, for doctor. */
export interface SentSummary {
  fromVersion: number;
  toVersion: number;
  upserts: number;
  removals: number;
  components: string[];
  expectedHash: string;
  at: string;
}

export interface Expectation {
  version: number;
  hash: string;
  /** For an agent of an older revision: the hash over every field, also accepted (see sync.ts). */
  alt?: string;
  digest: StoredDigest;
}

/** Per membership: where the agent is, by its acks, and what it was sent. */
export interface SyncRecord {
  /** Moved only by an ack (or a hello) whose hash matches what the controller computed. */
  applied: number;
  appliedHash: string;
  /** The version the agent will be at once it applies what was sent; deltas continue from here. */
  sent: number;
  /**
   * Lazy fan-out: a version ≥ `sent` up to which the controller checked that the node's view did
   * not change (the view there is the one at `sent`). Deltas are computed from here and labelled
   * from `sent`. Absent in records written before it: `sent`.
   */
  basis?: number;
  /** The latest version that changed the node's view (gap = target − applied). Absent: the network's version. */
  target?: number;
  /** The protocol revision of the agent's last hello: the hash it acks is over the fields it knows (absent: the current one). */
  revision?: number;
  /** Snapshots asked for in a row (a hash that differed, a resync) without a matching ack since. */
  mismatches?: number;
  /** No snapshot before this time (epoch ms): exponential backoff between snapshots asked for in a row. */
  snapshotNotBefore?: number;
  /** Set after too many in a row: no more snapshots until an ack or a hello matches; a MESHP code and why. */
  diverged?: string;
  /**
   * Peers this node was told were UNSCOPED and not since back in scope nor removed: its tunnel may
   * hold them in a grace period, so their removal is sent to it too (REMOVED of a peer outside the
   * view changes no hash). Absent: none.
   */
  graced?: string[];
  /** Expected view digest per version sent and not yet superseded by an ack. */
  expectations: Expectation[];
  snapshotPending: boolean;
  recent: SentSummary[];
  lastAgentHash: string;
  firewallKind: string;
  held: number;
  changed: number;
  /** What the agent last reported of itself (status.ts): absent until its first report. */
  reported?: ReportedState;
  /** The state version the last change of mode was recorded at (0: none since the node joined). */
  requestedVersion?: number;
}

/** The agent's own word, as its last report gave it: the only source of a node's mode and health. */
export interface ReportedState {
  /** The version the reported reconcile ran on. */
  version: number;
  mode: Mode;
  lifecycle?: { state: string; previewId: string; code: string; message: string; at: string };
  reconcile?: { result: 'ok' | 'refused'; code: string; message: string; at: string; refusedResources: number };
  refusedResources: number;
  /** The refused resources' codes, each with how many (the codes the agent's reasons begin with). Absent: none, or an older record. */
  refusedCodes?: Record<string, number>;
  /** The tunnel the agent runs, by its report: its key sent or not, its interface, why it is not up ('' when it is). Absent: an older record. */
  tunnel?: { key: boolean; interface: string; error: string };
  at: string;
  /** The tunnel's handshakes as the last report gave them. Absent: the agent does not report them (no tunnel, or an older agent). */
  handshakes?: ReportedHandshakes;
}

/** What the controller keeps of a report's tunnel handshakes: enough to say, later, how old the newest is. */
export interface ReportedHandshakes {
  /** Peers configured on the node's tunnel. */
  peers: number;
  /** The newest handshake's age when the report was made (the report's time minus it, both by the agent's clock); -1: none yet. */
  ageAtReport: number;
  /** When the controller received the report (its own clock): the age now is ageAtReport plus the time since. */
  receivedAt: string;
  /** Since when (the controller's clock) the node has reported peers without a break: how long a tunnel with no handshake yet has had them. */
  peersSince: string;
  /** issue 27: each peer's path as the device said, by peer name; absent from a controller before it. */
  paths?: ReportedPeerPath[];
}

/** One peer of a node's report (issue 27): what its device sends to, and how old its handshake was. */
export interface ReportedPeerPath {
  peer: string;
  /** '' none. */
  endpoint: string;
  /** direct | relayed | trying; '' an older agent or no endpoint. */
  path: string;
  /** This peer's latest handshake's age when the report was made (agent's clock); -1: never. */
  ageAtReport: number;
  /** Since when (controller's clock) the node has reported this peer without a break. */
  since: string;
}

/**
 * The state delta and the agent's view, in the shape of `proto/meshp/v1/control.proto` as the
 * generated code (ts-proto, useOptionals=messages) reads and writes it: a decoded message is
 * handed to `applyDelta` as it is, and a computed delta goes to `StateDelta.encode` as it is.
 * Enums are their wire numbers; a number the agent does not know is refused, never guessed.
 */

export const REMOVAL_REASON = Object.freeze({ UNSPECIFIED: 0, REMOVED: 1, UNSCOPED: 2 });
export const WIRE_MODE = Object.freeze({ UNSPECIFIED: 0, ADOPTED: 1, CONVERGED: 2 });
export const WIRE_PROTOCOL = Object.freeze({ UNSPECIFIED: 0, TCP: 1, UDP: 2 });
export const WIRE_PATH = Object.freeze({ UNSPECIFIED: 0, INCOMING: 1, FORWARDED: 2 });

export interface Peer {
  id: string;
  nodeKey: string;
  addresses: string[];
  tags: string[];
  endpoints: string[];
  /** The peer may reach this node; this node may not reach it. */
  inboundOnly: boolean;
  /** The peer's WireGuard public key (base64); absent or empty when it has none. */
  tunnelKey?: string | undefined;
}

export interface PeerRemoval {
  id: string;
  /** REMOVAL_REASON.REMOVED or REMOVAL_REASON.UNSCOPED. */
  reason: number;
}

export interface DnsRecord {
  /** Relative to the mesh's domain. */
  name: string;
  /** A and AAAA answers, by family. */
  addresses: string[];
  /** A CNAME's target ('': none): a name of the mesh, or a full name ending in ".". */
  cname: string;
}
export interface DnsSplit {
  domain: string;
  nameservers: string[];
}
export interface Dns {
  nameservers: string[];
  searchDomains: string[];
  records: DnsRecord[];
  /** The mesh's domain; '': `<network>.mesh` (DEFAULT_DNS_SUFFIX). */
  domain: string;
  splits: DnsSplit[];
}
export interface FilterRule {
  sourceTags: string[];
  destinationTags: string[];
  ports: string[];
}
export interface Filter {
  rules: FilterRule[];
}
export interface RouteGroup {
  name: string;
  prefixes: string[];
  viaPeers: string[];
  /** issue 26 (ADR 0038): the via nodes do not masquerade mesh sources toward the prefixes. Absent or false: they do (revision 4). */
  noMasquerade: boolean;
}
export interface RouteGroups {
  groups: RouteGroup[];
}
/** A TURN server as one node is sent it, with that node's short-lived credential (issue 27, ADR 0040). */
export interface Relay {
  id: string;
  address: string;
  port: number;
  region: string;
  /** udp | tcp ('' : udp). */
  transport: string;
  /** TURN REST API username `EXPIRY:NODE`. */
  username: string;
  /** base64(HMAC-SHA1(secret, username)). */
  password: string;
  /** Unix seconds. */
  expires: number;
}
export interface Relays {
  relays: Relay[];
}
export interface Tunnel {
  address: string;
  listenPort: number;
  mtu: number;
  keepaliveSeconds: number;
}

export interface WireSettings {
  ports: { [key: string]: number };
  privateRange?: string | undefined;
}
export interface WireFileSpec {
  path: string;
  content: string;
  mode?: string | undefined;
  createOnce?: boolean | undefined;
}
export interface WirePortSpec {
  container: number;
  host: number;
  protocol: number;
}
export interface WireMountSpec {
  source: string;
  target: string;
  readOnly: boolean;
}
export interface WireContainerSpec {
  name: string;
  image: string;
  command: string[];
  env: { [key: string]: string };
  ports: WirePortSpec[];
  mounts: WireMountSpec[];
  restart?: string | undefined;
}
export interface WireOpeningSpec {
  id?: string | undefined;
  port: number;
  protocol: number;
  from: string[];
  path: number;
}
export interface WireModuleDecl {
  name: string;
  taken: boolean;
  files: WireFileSpec[];
  containers: WireContainerSpec[];
  openings: WireOpeningSpec[];
}
export interface WireDeclaration {
  apiVersion: string;
  node: string;
  /** WIRE_MODE; every declaration says whether the node is adopted (ADR 0002). */
  mode: number;
  settings?: WireSettings | undefined;
  modules: WireModuleDecl[];
  /** On a converged node: the preview its flip was recorded with ('': none given). */
  convergePreviewId: string;
  /** Modules untaken through the controller (issue 29), each with the preview the operator saw. */
  untakes: WireModuleUntake[];
  /** Modules released with --restore (issue 29), each with the preview the operator saw. */
  releases: WireModuleUntake[];
}
export interface WireModuleUntake {
  module: string;
  previewId: string;
}

/** The components of a view. Absent in a delta: unchanged. Present (even empty): replaced. */
export interface Components {
  dns?: Dns | undefined;
  filter?: Filter | undefined;
  routeGroups?: RouteGroups | undefined;
  relays?: Relays | undefined;
  tunnel?: Tunnel | undefined;
  declaration?: WireDeclaration | undefined;
}

export type ComponentName = keyof Components;

/** Every component, in a fixed order (the hash and the snapshot rely on it). */
export const COMPONENT_NAMES: readonly ComponentName[] = Object.freeze(['dns', 'filter', 'routeGroups', 'relays', 'tunnel', 'declaration'] as const);

export interface DeltaPart {
  index: number;
  count: number;
}

export interface StateDelta extends Components {
  /** 0: a snapshot, which replaces the whole view. */
  fromVersion: number;
  toVersion: number;
  upsertPeers: Peer[];
  removePeers: PeerRemoval[];
  network: string;
  part?: DeltaPart | undefined;
  /** The hash the controller expects once applied ('' or absent: not said). */
  stateHash?: string | undefined;
  /** The controller's signature over `versionPayload(network, toVersion, stateHash)`. */
  versionSignature?: Uint8Array | undefined;
}

/** What the controller signs for a version it sends (control.proto, StateDelta.version_signature). */
export function versionPayload(network: string, version: number, stateHash: string): Uint8Array {
  return new TextEncoder().encode(`meshp-version-v1\u0000${network}\u0000${version}\u0000${stateHash}`);
}

export function isSnapshot(delta: Pick<StateDelta, 'fromVersion'>): boolean {
  return delta.fromVersion === 0;
}

export function emptyDelta(network: string, fromVersion: number, toVersion: number): StateDelta {
  return { fromVersion, toVersion, upsertPeers: [], removePeers: [], network };
}

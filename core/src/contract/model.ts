/** The declaration: what a host is asked to be. One document, from a controller or from a file. */

export type Mode = 'adopted' | 'converged';
export const MODES: readonly Mode[] = ['adopted', 'converged'];

export type Protocol = 'tcp' | 'udp';
export type TrafficPath = 'incoming' | 'forwarded';

export interface Settings {
  /** The foundation's ports, by name (store, bus, registry, broker, …). The catalogue's numbers are only defaults. */
  ports: Record<string, number>;
  /** The private network's address range (CIDR). */
  privateRange?: string;
}

export interface FileSpec {
  path: string;
  content: string;
  /** Octal permission bits as a string, e.g. "0644". */
  mode?: string;
  /** Written only when absent; an existing file is never rewritten. */
  createOnce?: boolean;
}

export interface PortSpec {
  container: number;
  host: number;
  protocol?: Protocol;
}

export interface MountSpec {
  source: string;
  target: string;
  readOnly?: boolean;
}

export interface ContainerSpec {
  name: string;
  image: string;
  command?: string[];
  env?: Record<string, string>;
  ports?: PortSpec[];
  mounts?: MountSpec[];
  restart?: 'no' | 'always' | 'unless-stopped' | 'on-failure';
}

export interface OpeningSpec {
  /** Stable id; derived from module, port, protocol and path when absent. */
  id?: string;
  port: number;
  protocol?: Protocol;
  /** CIDR ranges allowed; empty or absent means anywhere. */
  from?: string[];
  path: TrafficPath;
}

export interface ModuleDecl {
  name: string;
  taken: boolean;
  files?: FileSpec[];
  containers?: ContainerSpec[];
  openings?: OpeningSpec[];
}

export interface Declaration {
  apiVersion: 'meshp/v1';
  node: string;
  mode: Mode;
  settings: Settings;
  modules: ModuleDecl[];
}

/**
 * An opening as the firewall sees it: a port reachable from a range, on a path.
 * A refusal has the same shape with action "drop".
 */
export interface Opening {
  id: string;
  module: string;
  port: number;
  protocol: Protocol;
  from: string[];
  path: TrafficPath;
  action: 'accept' | 'drop';
  /**
   * Refusals only: sources spared from the drop (the private range). A refusal with `from` empty
   * and `except: [privateRange]` drops the port from anywhere outside the private network.
   */
  except?: string[];
}

/** A route rule's port match on the forwarded path: `any` (every protocol), or tcp/udp with a port or range (`80`, `8000-8100`). */
export interface RoutePorts {
  protocol: Protocol | 'any';
  range?: string;
}

/**
 * A route group's forwarded path on one of its via nodes (issue 26, ADR 0038): new connections
 * arriving on the tunnel interface from `allow`'s sources to the group's prefixes (with its ports),
 * their replies, and, with `masquerade`, the mesh sources SNAT'ed toward the prefixes. The firewall
 * driver writes it in the found firewall's own terms (marked `meshp:route/<group>…`), or in the
 * derived filter on a converged node.
 */
export interface RouteForward {
  group: string;
  /** The tunnel interface the mesh's traffic arrives on. */
  iif: string;
  /** The group's prefixes (IPv4 and IPv6). */
  to: string[];
  /** What the policy's rules to `route:NAME` allow: sources (their mesh addresses, CIDR) and ports. */
  allow: { from: string[]; ports: RoutePorts[] }[];
  masquerade: boolean;
}

export type ResourceKind = 'file' | 'container' | 'opening';
export const RESOURCE_KINDS: readonly ResourceKind[] = ['file', 'container', 'opening'];

/** A resource's state in every report. */
export type ResourceState =
  | 'created' // absent, the host made it
  | 'owned' // the host wrote it and keeps it converged
  | 'held' // found, kept as it was
  | 'changed' // held, and changed since by something else
  | 'released' // held (or kept original), its module unassigned: left in place
  | 'pending' // declared, waiting for its module to be taken
  | 'refused' // could not be applied; see reason
  | 'unverified'; // written, but the firewall's walk cannot confirm it open (a match it cannot read); see reason

export function resourceKey(kind: ResourceKind, id: string): string {
  return `${kind}:${id}`;
}

export function openingId(module: string, o: OpeningSpec): string {
  return o.id ?? `${module}/${o.path}/${o.protocol ?? 'tcp'}/${o.port}`;
}

export function toOpening(module: string, o: OpeningSpec, action: Opening['action'] = 'accept'): Opening {
  return {
    id: openingId(module, o),
    module,
    port: o.port,
    protocol: o.protocol ?? 'tcp',
    from: [...(o.from ?? [])],
    path: o.path,
    action,
  };
}

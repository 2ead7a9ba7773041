/**
 * The plan a host makes for one declaration (an action per resource, the firewall's openings) and
 * the report it makes after applying it. Plugins add actions to the plan and facts to the report
 * through the hooks in plugin.ts.
 */
import type { Declaration, Mode, Opening, ResourceKind, ResourceState, RouteForward } from './model.js';

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
  firewall: { openings: Opening[]; refusals: Opening[]; kind: string | null; forwards?: RouteForward[] };
}

/** One tunnel peer's latest WireGuard handshake, by the agent's clock. */
export interface PeerHandshake {
  /** The peer's node name in the view. */
  peer: string;
  publicKey: string;
  /** Unix seconds; 0: never. */
  latestHandshake: number;
  /** The endpoint the device sends to now (IP:PORT, [IPv6]:PORT); absent: none. */
  endpoint?: string;
  /**
   * direct: the peer's own address or NAT mapping; relayed: the agent's local relay proxy; trying: a
   * direct candidate set in place of the relay for a bounded trial, no packet from it seen yet (the
   * handshake is the last one, on the relay). Absent: an older agent.
   */
  path?: PeerPathKind;
}

/** How a tunnel peer is reached (issue 27): a path is direct or relayed only where a handshake on it can have come. */
export type PeerPathKind = 'direct' | 'relayed' | 'trying';

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

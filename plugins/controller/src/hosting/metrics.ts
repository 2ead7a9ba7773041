/**
 * Prometheus `/metrics` through prom-client: per node its gap, its stream (connected, last report),
 * its refusals and its status, with the process metrics and `meshp_build_info`. One registry per
 * controller (tests run several in one process). A node's labels are its network and name only:
 * its mode is a value of its own series, so a flip does not cut the gap's history in two.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import { MeshpError } from '@meshp/core';
import type { Controller } from '../controller.js';
import { HANDSHAKE_STALE_SECONDS, type NodeHandshakes, type PeerPathView } from '../handshake-status.js';
import { withLiveness, type Liveness, type NodeHealth, type NodeStatus } from '../status.js';
import { usage } from '@meshp/core/util';

const HEALTH: NodeHealth[] = [
  'ok',
  'behind',
  'changing',
  'refusing',
  'silent',
  'pending',
  'diverged',
  'no-tunnel',
  'no-handshake',
  'peer-unreachable',
  'unverified',
  'expired',
];
const MODES = ['adopted', 'converged', 'unknown'] as const;
export const BUILD_VERSION = '0.1.0';

export interface MetricsSource {
  controller: Controller;
  connected(): number;
  live(network: string, node: string): Liveness;
  /** The no-handshake limit the statuses are computed with. */
  handshakeStaleSeconds?: number;
}

const seconds = (iso: string): number => (iso ? Date.parse(iso) / 1000 : 0);

export class Metrics {
  deltasSent = 0;
  snapshotsSent = 0;
  bytesSent = 0;
  enrolments = 0;
  /** Route groups whose primary moved to another via node (issue 26), and when one last did (epoch s, 0: never). */
  routeFailovers = 0;
  lastRouteFailover = 0;
  readonly refusals = new Map<string, number>();
  readonly registry = new Registry();
  #source: MetricsSource | null = null;

  constructor() {
    const r = this.registry;
    collectDefaultMetrics({ register: r });
    new Gauge({ name: 'meshp_build_info', help: 'the running build: always 1', labelNames: ['version', 'node_version'], registers: [r] }).set(
      { version: BUILD_VERSION, node_version: process.version },
      1,
    );
    this.#callMetrics(r);
    this.#storeMetrics(r);
    this.#nodeMetrics(r);
    this.#peerMetrics(r);
    this.#nodeStatusMetrics(r);
  }

  /** What the controller did: deltas, snapshots, bytes, enrolments, refusals; agents connected; each network's version. */
  #callMetrics(r: Registry): void {
    const self = this;
    const counter = (name: string, help: string, get: () => number) =>
      new Counter({
        name,
        help,
        registers: [r],
        collect() {
          this.reset();
          this.inc(get());
        },
      });
    counter('meshp_deltas_sent_total', 'incremental deltas sent', () => self.deltasSent);
    counter('meshp_snapshots_sent_total', 'snapshots (from_version 0) sent', () => self.snapshotsSent);
    counter('meshp_delta_bytes_sent_total', 'bytes of the state deltas and snapshots sent, as encoded on the wire (protobuf)', () => self.bytesSent);
    counter('meshp_enrolments_total', 'nodes enrolled', () => self.enrolments);
    counter(
      'meshp_route_failovers_total',
      "route groups whose primary moved to another via node (its primary's stream ended, or one came up while it was down)",
      () => self.routeFailovers,
    );
    new Gauge({
      name: 'meshp_route_last_failover_timestamp_seconds',
      help: 'when a route group last moved to another via node (0: never, since this controller started)',
      registers: [r],
      collect() {
        this.set(self.lastRouteFailover);
      },
    });
    new Counter({
      name: 'meshp_refusals_total',
      help: 'calls and streams refused, by code',
      labelNames: ['code'],
      registers: [r],
      collect() {
        this.reset();
        for (const [code, v] of self.refusals) this.inc({ code }, v);
      },
    });
    new Gauge({
      name: 'meshp_connected_agents',
      help: 'agents with an authenticated Sync stream',
      registers: [r],
      collect() {
        this.set(self.#source?.connected() ?? 0);
      },
    });
    new Gauge({
      name: 'meshp_state_version',
      help: 'the state version of each network',
      labelNames: ['network'],
      registers: [r],
      collect() {
        this.reset();
        const c = self.#source?.controller;
        for (const network of c?.networks() ?? []) this.set({ network }, c!.stateVersion(network));
      },
    });
  }

  /** The store's health: down, changes are refused and reads answer from memory. */
  #storeMetrics(r: Registry): void {
    const self = this;
    // The store's health (issue 24): down, changes are refused and reads answer from memory.
    new Gauge({
      name: 'meshp_controller_store_up',
      help: "1 while the controller's store takes writes, 0 from its first refused write until one is taken again",
      registers: [r],
      collect() {
        this.set(self.#source?.controller.storeHealth.up === false ? 0 : 1);
      },
    });
    new Gauge({
      name: 'meshp_controller_store_down_since_timestamp_seconds',
      help: "when the controller's store went down (0: it is up)",
      registers: [r],
      collect() {
        this.set(seconds(self.#source?.controller.storeHealth.view().downSince ?? ''));
      },
    });
    new Counter({
      name: 'meshp_controller_store_changes_recomputed_total',
      help: 'changes computed again because another controller committed first (the store guard did not hold)',
      registers: [r],
      collect() {
        this.reset();
        this.inc(self.#source?.controller.storeHealth.recomputed ?? 0);
      },
    });
    new Counter({
      name: 'meshp_controller_store_errors_total',
      help: "errors of the controller's store, by code (MESHP_STORE_FULL, MESHP_STORE_UNAVAILABLE, MESHP_STATE_CORRUPT)",
      labelNames: ['code'],
      registers: [r],
      collect() {
        this.reset();
        for (const [code, v] of self.#source?.controller.storeHealth.errors ?? []) this.inc({ code }, v);
      },
    });
  }

  /** One gauge a node, its value read from the node's status; a node it has no value for (null) has no series. */
  #perNode(r: Registry, name: string, help: string, value: (n: NodeStatus) => number | null): void {
    const self = this;
    new Gauge({
      name,
      help,
      labelNames: ['network', 'node'],
      registers: [r],
      collect() {
        this.reset();
        for (const n of self.nodes()) {
          const v = value(n);
          if (v !== null) this.set({ network: n.network, node: n.name }, v);
        }
      },
    });
  }

  /** issue 27: each peer of each node, as the node's device said. */
  #peerMetrics(r: Registry): void {
    const self = this;
    // No series for a peer an older agent did not describe.
    const peerGauge = (name: string, help: string, value: (p: PeerPathView) => number) =>
      new Gauge({
        name,
        help,
        labelNames: ['network', 'node', 'peer', 'path'],
        registers: [r],
        collect() {
          this.reset();
          for (const n of self.nodes())
            for (const p of n.handshakes?.paths ?? []) this.set({ network: n.network, node: n.name, peer: p.peer, path: p.path || 'none' }, value(p));
        },
      });
    peerGauge(
      'meshp_peer_handshake_age_seconds',
      "seconds since the node's latest WireGuard handshake with this peer (-1: never), by the path its device uses (direct | relayed | trying: a direct candidate on trial | none: no endpoint)",
      (p) => p.ageSeconds,
    );
    peerGauge('meshp_peer_connected', "1 while the node's latest handshake with this peer is within meshp_handshake_stale_seconds", (p) =>
      p.state === 'connected' ? 1 : 0,
    );
  }

  /** Each node's status, as `node list` shows it. */
  #nodeMetrics(r: Registry): void {
    const self = this;
    const perNode = (name: string, help: string, value: (n: NodeStatus) => number) => this.#perNode(r, name, help, value);
    // Only the nodes whose agent reports handshakes: no series is said for what was not observed.
    const tunnelNode = (name: string, help: string, value: (h: NodeHandshakes) => number) =>
      this.#perNode(r, name, help, (n) => (n.handshakes?.reported ? value(n.handshakes) : null));
    perNode(
      'meshp_convergence_gap',
      'versions the node has yet to apply that change its view: the latest version that changed it minus applied_version (a change that does not concern the node is nothing to apply: applied_version may stay below meshp_state_version at gap 0)',
      (n) => n.gap,
    );
    perNode('meshp_applied_version', 'the version each node acked', (n) => n.appliedVersion);
    perNode('meshp_node_connected', '1 while the node has an authenticated Sync stream', (n) => (n.connected ? 1 : 0));
    perNode('meshp_node_last_report_timestamp_seconds', "when the node's agent made its last report, by its clock (0: never)", (n) => seconds(n.reportedAt));
    perNode(
      'meshp_node_last_message_timestamp_seconds',
      "when the node's agent last sent a message on its stream: hello, ack, report, resync (0: never since this controller started)",
      (n) => seconds(n.lastSeen),
    );
    perNode(
      'meshp_node_last_contact_timestamp_seconds',
      "the last time the node's stream was known open: the scrape's time while connected (keepalive pings every 20 s, 10 s to answer), else when it ended (0: never)",
      (n) => seconds(n.lastContact),
    );
    tunnelNode(
      'meshp_node_tunnel_peers',
      'tunnel peers configured on the node, as its agent last reported (tunnel members whose agent reports handshakes only)',
      (h) => h.peers,
    );
    tunnelNode(
      'meshp_node_tunnel_handshake_age_seconds',
      'seconds since the newest WireGuard handshake with any of the tunnel peers (-1: none yet); over meshp_handshake_stale_seconds the status is no-handshake',
      (h) => h.newestAgeSeconds,
    );
    new Gauge({
      name: 'meshp_handshake_stale_seconds',
      help: 'the limit: a tunnel member none of whose peers handshaked within it is no-handshake',
      registers: [r],
      collect() {
        this.set(self.#source?.handshakeStaleSeconds ?? HANDSHAKE_STALE_SECONDS);
      },
    });
    perNode('meshp_node_refused_resources', 'resources the last reconcile refused', (n) => n.refusedResources);
    perNode('meshp_node_reconcile_refused', '1 when the last reconcile was refused as a whole (its code in meshp_node_status)', (n) =>
      n.reconcile.result === 'refused' ? 1 : 0,
    );
  }

  /** Each node's status, mode and refusals by code, and the networks' divergence, from the nodes as listed. */
  #nodeStatusMetrics(r: Registry): void {
    const self = this;
    new Gauge({
      name: 'meshp_node_refused_resources_by_code',
      help: 'resources the last reconcile refused, by the code of each refusal',
      labelNames: ['network', 'node', 'code'],
      registers: [r],
      collect() {
        this.reset();
        for (const n of self.nodes()) for (const [code, k] of Object.entries(n.refusedCodes ?? {})) this.set({ network: n.network, node: n.name, code }, k);
      },
    });
    new Gauge({
      name: 'meshp_diverged',
      help: 'memberships whose snapshots stopped after too many in a row not applied with the hash expected, by code',
      labelNames: ['network', 'node', 'code'],
      registers: [r],
      collect() {
        this.reset();
        for (const n of self.nodes()) if (n.diverged) this.set({ network: n.network, node: n.name, code: n.diverged.split(':')[0]! }, 1);
      },
    });
    new Gauge({
      name: 'meshp_node_exit_node',
      help: 'the exit node (route group for the default routes) each node uses, by name, and its primary: 1 (ADR 0039)',
      labelNames: ['network', 'node', 'exit_node', 'primary'],
      registers: [r],
      collect() {
        this.reset();
        for (const n of self.nodes()) if (n.exitNode) this.set({ network: n.network, node: n.name, exit_node: n.exitNode, primary: n.exitNodePrimary }, 1);
      },
    });
    new Gauge({
      name: 'meshp_node_status',
      help: 'what stands out of each node: 1 for its status, 0 for the others',
      labelNames: ['network', 'node', 'status'],
      registers: [r],
      collect() {
        this.reset();
        for (const n of self.nodes()) for (const status of HEALTH) this.set({ network: n.network, node: n.name, status }, n.status === status ? 1 : 0);
      },
    });
    new Gauge({
      name: 'meshp_node_mode',
      help: "the mode each node's agent last reported: 1 for it, 0 for the others",
      labelNames: ['network', 'node', 'mode'],
      registers: [r],
      collect() {
        this.reset();
        for (const n of self.nodes()) for (const mode of MODES) this.set({ network: n.network, node: n.name, mode }, n.mode === mode ? 1 : 0);
      },
    });
  }

  /** Where the per-node series come from (the controller and its streams). */
  attach(source: MetricsSource): void {
    this.#source = source;
  }

  refused(code: string): void {
    this.refusals.set(code, (this.refusals.get(code) ?? 0) + 1);
  }

  nodes(): NodeStatus[] {
    const s = this.#source;
    if (!s) return [];
    return s.controller.networks().flatMap((network) => s.controller.listNodes(network).map((n) => withLiveness(n, s.live(network, n.name))));
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }
}

export async function serveMetrics(
  address: string,
  render: () => Promise<string>,
  contentType = 'text/plain; version=0.0.4; charset=utf-8',
): Promise<{ address: string; close(): Promise<void> }> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!m) throw usage(`${address} is not HOST:PORT`);
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      render().then(
        (body) => res.writeHead(200, { 'content-type': contentType }).end(body),
        (e: unknown) => res.writeHead(500).end(`${e instanceof Error ? e.message : String(e)}\n`),
      );
    } else res.writeHead(404).end('not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (cause) => reject(new MeshpError('MESHP_UNAVAILABLE', `cannot listen on ${address}`, { cause })));
    server.listen(Number(m[2]), m[1], resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return { address: `${m[1]}:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

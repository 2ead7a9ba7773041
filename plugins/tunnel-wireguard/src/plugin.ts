/**
 * The mesh's private network: one WireGuard interface per network membership, fed by the deltas.
 *
 * - upserted → the peer with its tunnel key, endpoint and mesh addresses as allowed IPs;
 * - REMOVED → the peer is gone from the interface at once;
 * - UNSCOPED → its traffic is dropped at once by the filter, the peer stays configured for a grace
 *   period (a policy flap costs no handshake), then goes.
 * Each delta is one device call with only the peers it changed, and at most one nft transaction.
 */
import { join } from 'node:path';
import { rmSync } from 'node:fs';
import { MeshpError, PLUGIN_API_VERSION, type PluginHost, type Peer, type PeerHandshake, type Plugin, type ViewChange, type Components } from '@meshp/core';
import { oneLine, usage } from '@meshp/core/util';
import { openDevice, type Device, type DeviceChange, type Implementation, type PeerOp } from './device.js';
import type { DevicePeer, DeviceState } from './uapi.js';
import { run } from './exec.js';
import { TunnelFilter } from './filter.js';
import { readGrace, writeGrace, type GraceEntry } from './grace.js';
import { ensureTunnelKey, renewTunnelKey, type TunnelKey } from './keys.js';
import { peerConfig, relayedOf, sameConfig, type PeerConfig } from './peer-config.js';
import { peerHandshakes } from './handshakes.js';
import { EndpointTrials, keepChosen } from './candidates.js';
import { DirectTrials, type DirectTrialOptions } from './direct-trials.js';
import { RelayPaths } from './relay-paths.js';
import { withTunnelOpening } from './opening.js';
import { leaveTunnel } from './leave.js';
import { configureLink, settingsOf, type TunnelSettings } from './settings.js';
import { kernelRoutes, routedPrefixes, samePrefixes, servedGroups, setKernelRoutes } from './routes.js';
import { procSysctl, ROUTING_MODULE, RouterForwarding, type ForwardingStatus, type Sysctl } from './forwarding.js';
import { routeForwards } from './route-forward.js';
import { bypassAddresses, familiesOf, removeExitRoutes, setExitRoutes } from './exit-routes.js';

export const DEFAULT_GRACE_MS = 5 * 60_000;

/** This node's foundation ports from its declaration's settings (the tunnel's own UDP port aside): every peer reaches them. */
export function foundationPorts(c: Components): number[] {
  const ports = c.declaration?.settings?.ports ?? {};
  return Object.entries(ports)
    .filter(([name]) => name !== 'tunnel')
    .map(([, p]) => p)
    .sort((a, b) => a - b);
}

/** What the plugin reads: the agent's view (`AgentView` fits). */
export interface ViewSource {
  readonly version: number;
  readonly peers: ReadonlyMap<string, { peer: Peer }>;
  peer(id: string): Peer | undefined;
  readonly components: Components;
}

export interface TunnelLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  error(fields: Record<string, unknown>, msg: string): void;
}

export interface TunnelWireguardOptions {
  /** The interface name, unique on the machine (wireguard-go's sockets share one folder). At most 15 characters. */
  interface: string;
  /** Where the private key, wireguard-go's pid and the grace list live. Default: the host's state folder + /wireguard. */
  stateDir?: string;
  /** How long an unscoped peer stays configured (its traffic dropped). Default 5 minutes. */
  graceMs?: number;
  implementation?: 'auto' | Implementation;
  /** The wireguard-go binary. */
  wireguardGo?: string;
  /** The private range, when the declaration does not carry one. */
  privateRange?: string;
  /** Overrides the tunnel component's port. */
  listenPort?: number;
  /** Enforce the filter component on the interface (default true). */
  filter?: boolean;
  /** How long a peer's endpoint is given to handshake before its next candidate is set (default ENDPOINT_TRY_MS, 15 s). */
  endpointTryMs?: number;
  /** A relayed peer's trials of its direct candidates (direct-trials.ts): the first after 60 s, doubling to 16 min, each judged after 5 s. */
  directTrials?: DirectTrialOptions;
  log?: TunnelLog;
  /** A router's forwarding sysctls (forwarding.ts). Default: this process's /proc/sys. */
  sysctl?: Sysctl;
  /** The controller's hosts: kept out of an exit node's default route by a rule ahead of it (exit-routes.ts). */
  exitBypass?: string[];
}

export interface TunnelStatus {
  interface: string;
  implementation: Implementation | null;
  pid: number | null;
  publicKey: string;
  address: string;
  listenPort: number;
  appliedVersion: number;
  peers: number;
  grace: string[];
  lastError: string | null;
  /** A router's forwarding as found, held or turned on (forwarding.ts). */
  forwarding: ForwardingStatus;
  /** The exit node (route group) whose default routes this node sends into the tunnel, and its primary; null: none (exit-routes.ts). */
  exit: { group: string; via: string; families: string[] } | null;
}

const SILENT: TunnelLog = { info() {}, warn() {}, error() {} };

export class TunnelWireguardPlugin implements Plugin {
  readonly name = 'tunnel-wireguard';
  readonly apiVersion = PLUGIN_API_VERSION;
  readonly #o: TunnelWireguardOptions & { graceMs: number };
  readonly #log: TunnelLog;
  readonly #filter: TunnelFilter;
  readonly #forwarding: RouterForwarding;
  readonly #configured = new Map<string, PeerConfig>();
  /** Peer id → the prefixes it carries as a route group's primary (routes.ts). */
  #routed = new Map<string, string[]>();
  /** The prefixes routed into the interface. */
  #routes = new Set<string>();
  /** The map before this change's (#routesMoved): an unscoped peer's grace covers its own addresses only. */
  #routedWas = new Map<string, string[]>();
  /** The exit node used now (exit-routes.ts). */
  #exit: TunnelStatus['exit'] = null;
  readonly #grace = new Map<string, GraceEntry & { timer?: ReturnType<typeof setTimeout> }>();
  #stateDir = '';
  #key: TunnelKey | null = null;
  #view: ViewSource | null = null;
  #device: Device | null = null;
  #settings: TunnelSettings | null = null;
  #chain: Promise<void> = Promise.resolve();
  #applied = 0;
  #lastError: string | null = null;
  #closed = false;
  /** The node left its network (the leave hook ran): nothing is raised again, not even by an attach. */
  #left = false;
  /** Each peer's candidate endpoints tried in turn (issue 27); the look every tick, queued behind the deltas. */
  #trials: EndpointTrials;
  /** A relayed peer's direct candidates tried again, bounded (issue 27, ADR 0046). */
  readonly #direct: DirectTrials;
  #trialTimer: ReturnType<typeof setInterval> | null = null;
  /** The peers whose failed direct trial is being set back to the relay (still a trial to the report). */
  readonly #trialEnding = new Set<string>();
  /** The node's relay allocation and its peers' relayed paths (issue 27, relay-paths.ts). */
  readonly #relays: RelayPaths;
  /** The peers whose endpoint is their relayed path (kept through an allocation lost and made again). */
  readonly #onRelay = new Set<string>();

  constructor(options: TunnelWireguardOptions) {
    if (!/^[A-Za-z0-9_.-]{1,15}$/.test(options.interface ?? '')) {
      throw usage(`tunnel interface name ${JSON.stringify(options.interface)}: 1 to 15 letters, digits, _ . -`);
    }
    const graceMs = options.graceMs ?? DEFAULT_GRACE_MS;
    if (!Number.isFinite(graceMs) || graceMs < 0) throw usage('the tunnel grace period is a number of ms ≥ 0');
    this.#o = { ...options, graceMs };
    this.#log = options.log ?? SILENT;
    this.#filter = new TunnelFilter(options.interface);
    this.#forwarding = new RouterForwarding(options.sysctl ?? procSysctl(), this.#log);
    this.#trials = new EndpointTrials(options.endpointTryMs);
    this.#direct = new DirectTrials(options.directTrials);
    this.#relays = new RelayPaths(
      () => this.#settings?.listenPort ?? this.#o.listenPort ?? 51820,
      this.#log,
      () => this.#enqueue('relay', () => this.#relayMoved()),
    );
  }

  /**
   * The served prefixes whose traffic can reach this router: WireGuard takes from a peer only packets
   * whose source is in its allowed IPs (its mesh addresses), so an IPv6 prefix (an exit's ::/0) is
   * forwarded only when a peer of the view has an IPv6 mesh address; without one, IPv6 forwarding is
   * not needed and is not turned on (it would stop the machine's router advertisements for nothing).
   */
  #forwardedFamilies(served: string[]): string[] {
    const v6Sources = [...(this.#view?.peers.values() ?? [])].some((e) => e.peer.addresses.some((a) => a.includes(':')));
    return v6Sources ? served : served.filter((p) => !p.includes(':'));
  }

  apply(host: PluginHost): void {
    this.#stateDir = this.#o.stateDir ?? join(host.options.stateDir, 'wireguard');
    host.hooks.viewChanged.tap(this.name, (change) => {
      if (this.#view) this.#enqueue('delta', () => this.#onChange(change));
    });
    host.hooks.plan.tapPromise(this.name, async (plan, ctx) => {
      const opened = withTunnelOpening(plan, ctx.declaration.settings, this.#o.listenPort);
      const store = await host.state().catch(() => null);
      // The view not followed yet (or the node left): its forwarding is neither said nor changed.
      const served = this.#view && !this.#left ? servedGroups(this.#view.components).flatMap((g) => g.prefixes) : null;
      const forwarding = store ? await this.#forwarding.actions(opened, ctx, store, served && this.#forwardedFamilies(served)) : [];
      const withActions = forwarding.length ? { ...opened, actions: [...opened.actions, ...forwarding] } : opened;
      // The forwarded path in the firewall (route-forward.ts): only where meshp may change the router, as for its forwarding.
      const mayChange = opened.mode === 'converged' || ctx.declaration.modules.some((m) => m.name === ROUTING_MODULE && m.taken);
      const forwards =
        served && mayChange && this.#view
          ? routeForwards(
              this.#view.components,
              [...this.#view.peers.values()].map((e) => e.peer),
              this.#o.interface,
            )
          : [];
      return forwards.length ? { ...withActions, firewall: { ...withActions.firewall, forwards } } : withActions;
    });
    host.hooks.report.tapPromise(this.name, async (report) => ({
      ...report,
      // The router's forwarding, once a plan has read it (forwarding.ts): the agent reports it.
      facts: {
        ...report.facts,
        tunnel: this.status(),
        ...(Object.keys(this.#forwarding.status.values).length ? { forwarding: this.#forwarding.status } : {}),
        ...(this.#relays.report() && !this.#left ? { relay: this.#relays.report() } : {}),
      },
      ...(await this.#handshakes()),
    }));
    host.hooks.leave.tapPromise(this.name, async (leaving) => {
      if (!leaving.preview) {
        this.#left = true;
        await this.#stopFollowing();
      }
      // The exit node's rules and table go first (the interface still there to have its fwmark put back).
      leaving.removed.push(...(await removeExitRoutes(this.#dir(), this.#o.interface, leaving.preview)));
      if (!leaving.preview) this.#exit = null;
      await leaveTunnel({ ifname: this.#o.interface, stateDir: this.#dir(), device: this.#device, graceFile: this.#graceFile() }, leaving);
      const store = await host.state().catch(() => null);
      const forwarding = store ? await this.#forwarding.restore(store, leaving.preview) : null;
      if (forwarding) leaving.removed.push(forwarding);
      if (!leaving.preview) this.#device = null;
    });
  }

  /** Each configured peer's latest handshake from the device; nothing when the device cannot be read (the controller then says unverified). */
  async #handshakes(): Promise<{ handshakes?: PeerHandshake[] }> {
    // Left the mesh: no tunnel to say anything of.
    if (this.#left) return {};
    // No device (not attached yet, or it failed to come up): the view's peers have had no handshake.
    if (!this.#device) return { handshakes: peerHandshakes(this.#wantedPeers(), { listenPort: 0, peers: [] }) };
    try {
      // Relayed only through a proxy socket of this node's allocation, and a handshake only once something came back through it.
      const hs = peerHandshakes(
        this.#configured,
        await this.#device.get(),
        // A socket of a relayed path gone (the allocation lost, the device not moved yet) is still relayed: carried by nothing.
        (e) => this.#relays.carried(e) !== null || this.#relays.wasRelay(e),
        (id) => this.#direct.trying(id) || this.#trialEnding.has(id),
      );
      // (A socket gone keeps the handshake the device has: it was on that relayed path, and ages from there.)
      const nothingBack = (e: string) => this.#relays.carried(e)?.fromRelay === 0;
      return { handshakes: hs.map((h) => (h.path === 'relayed' && nothingBack(h.endpoint!) ? { ...h, latestHandshake: 0 } : h)) };
    } catch (e) {
      this.#log.warn({ interface: this.#o.interface, err: oneLine(e) }, 'tunnel handshakes not readable');
      return {};
    }
  }

  /** The peers with no fresh handshake whose endpoint had its time: the next candidate each (candidates.ts); the relayed ones' direct trials. */
  async #tryEndpoints(): Promise<void> {
    if (!this.#device || this.#closed) return;
    // The relayed paths as the view has them now: a peer's relayed address with no socket (its path
    // not made, in whatever order the view and the allocation came) is made, a socket for an address
    // no peer has any more goes.
    const relayed = [...this.#configured].filter(([id]) => !this.#grace.has(id)).map(([, c]) => c.relayed);
    if (this.#relays.reconcile(relayed).missing) {
      await this.#relayMoved();
      // Said as it is after the try: made, or still missing (the next tick tries again).
      const still = this.#relays.reconcile(relayed).missing;
      this.#log.warn({ interface: this.#o.interface }, still ? 'relay: a peer has no relayed path: not made yet' : 'relay: a peer had no relayed path: made');
    }
    const state = await this.#device.get();
    const moves = this.#trials.next(this.#configured, state, Date.now(), (id) => this.#grace.has(id) || this.#direct.trying(id));
    if (moves.length) {
      await this.#device.set({ peers: moves.map(([, conf]) => ({ upsert: conf })) });
      for (const [id, conf] of moves) {
        this.#configured.set(id, conf);
        this.#chosen(id, conf, conf.endpoint);
        this.#log.info(
          { interface: this.#o.interface, peer: id, endpoint: conf.endpoint, candidates: conf.candidates },
          'no handshake: next candidate endpoint',
        );
      }
    }
    await this.#backToDirect(moves.length ? await this.#device.get() : state);
  }

  /**
   * A relayed peer's direct candidate tried, bounded (direct-trials.ts), judged from the device:
   * kept when an authenticated packet came from it, else the relay again within the window.
   */
  async #backToDirect(state: DeviceState): Promise<void> {
    const device = this.#device;
    if (!device) return;
    const isProxy = (e: string) => this.#relays.carried(e) !== null;
    // The device roamed to the peer's relayed socket by itself (the peer came through the relay): on the relay.
    const endpoints = new Map(state.peers.map((d) => [d.publicKey, d.endpoint]));
    for (const [id, conf] of this.#configured) {
      if (this.#onRelay.has(id) || this.#grace.has(id)) continue;
      const local = this.#relays.localFor(conf);
      if (local && endpoints.get(conf.publicKey) === local) {
        this.#onRelay.add(id);
        this.#configured.set(id, { ...conf, endpoint: local });
      }
    }
    const onRelay = (id: string) => (this.#onRelay.has(id) && !this.#grace.has(id) ? this.#relays.localFor(this.#configured.get(id)!) : undefined);
    for (const m of this.#direct.next(this.#configured, state, Date.now(), onRelay, isProxy)) {
      const conf = this.#configured.get(m.id);
      if (!conf) continue;
      const next = { ...conf, endpoint: m.endpoint };
      this.#configured.set(m.id, next);
      if (m.kind === 'direct') {
        this.#onRelay.delete(m.id);
        this.#log.info({ interface: this.#o.interface, peer: m.id, endpoint: m.endpoint }, 'relayed peer reached directly: direct path kept');
        continue;
      }
      // The endpoint set, and a keepalive sent to it at once: WireGuard sends one when the persistent keepalive is turned on.
      // A failed trial is still one until the relay is set back (the report says trying, not direct, meanwhile).
      if (m.kind === 'relay') this.#trialEnding.add(m.id);
      try {
        await device.set({ peers: [{ upsert: { ...next, keepalive: 0 } }] });
        await device.set({ peers: [{ upsert: next }] });
      } finally {
        this.#trialEnding.delete(m.id);
      }
      if (m.kind === 'relay') {
        this.#log.info({ interface: this.#o.interface, peer: m.id, endpoint: m.endpoint }, 'direct trial: no packet from the direct path, back to the relay');
        continue;
      }
      const rx = (await device.get()).peers.find((p) => p.publicKey === conf.publicKey)?.rxBytes ?? 0;
      this.#direct.started(m.id, rx, Date.now());
      this.#log.info({ interface: this.#o.interface, peer: m.id, endpoint: m.endpoint }, 'relayed peer: trying its direct candidate');
      const judge = setTimeout(() => this.#enqueue('endpoints', () => this.#tryEndpoints()), this.#direct.windowMs + 100);
      judge.unref();
    }
  }

  /** No more deltas, grace expiries or syncs: what runs finishes first. */
  async #stopFollowing(): Promise<void> {
    this.#closed = true;
    if (this.#trialTimer) clearInterval(this.#trialTimer);
    this.#trialTimer = null;
    await this.#relays.close();
    for (const g of this.#grace.values()) clearTimeout(g.timer);
    await this.#chain;
  }

  /** The public key for enrolment: made on first use, kept in the state folder (0600). */
  publicKey(): string {
    this.#key ??= ensureTunnelKey(this.#dir(), this.#o.interface);
    return this.#key.publicKey;
  }

  /**
   * A new key pair (issue 28, meshp node rekey): written in place of the old one, put on the device
   * (its peers keep the old public key until the controller sends them the new one, one delta: the
   * tunnel is down for them meanwhile), queued behind the changes handed over before it.
   */
  rekey(): Promise<void> {
    const done = this.#chain.then(async () => {
      if (this.#left) throw new MeshpError('MESHP_TUNNEL_FAILED', 'the node left its network: no tunnel to rekey');
      const was = this.#key?.publicKey ?? '';
      this.#key = renewTunnelKey(this.#dir(), this.#o.interface);
      if (this.#device) await this.#device.set({ peers: [], privateKey: this.#key.privateKey });
      this.#log.info({ interface: this.#o.interface, was, now: this.#key.publicKey }, 'tunnel key made anew (rekey)');
    });
    this.#chain = done.catch(() => undefined);
    return done;
  }

  /** Starts from the view as it is (restored from the store after a restart), then follows its deltas. */
  attach(view: ViewSource): Promise<void> {
    this.#view = view;
    this.#enqueue('attach', () => this.#sync());
    if (!this.#trialTimer) {
      // A look a third of the try time (at most every 5 s): one device read, a set only for a peer that moves.
      const every = Math.min(5_000, Math.max(200, Math.floor(this.#trials.tryMs / 3)));
      this.#trialTimer = setInterval(() => this.#enqueue('endpoints', () => this.#tryEndpoints()), every);
      this.#trialTimer.unref();
    }
    return this.settled();
  }

  /** Resolves when every change handed over so far has been applied (or refused: see `lastError`). */
  settled(): Promise<void> {
    return this.#chain;
  }

  status(): TunnelStatus {
    return {
      interface: this.#o.interface,
      implementation: this.#device?.implementation ?? null,
      pid: this.#device?.pid ?? null,
      publicKey: this.#key?.publicKey ?? '',
      address: this.#settings?.address ?? '',
      listenPort: this.#settings?.listenPort ?? 0,
      appliedVersion: this.#applied,
      peers: this.#configured.size,
      grace: [...this.#grace.keys()],
      lastError: this.#lastError,
      forwarding: this.#forwarding.status,
      exit: this.#exit,
    };
  }

  /** The view's peers that have a tunnel key: what the interface holds once the view is applied. */
  #wantedPeers(): Map<string, PeerConfig> {
    const out = new Map<string, PeerConfig>();
    for (const { peer } of this.#view?.peers.values() ?? []) {
      const c = peerConfig(peer, 0);
      if (c) out.set(peer.id, c);
    }
    return out;
  }

  /** Stops following the view. The tunnel stays up (an agent restart) unless `down`: then interface, process, table and grace list go. */
  async close(o: { down?: boolean } = {}): Promise<void> {
    await this.#stopFollowing();
    if (!o.down) return;
    await removeExitRoutes(this.#dir(), this.#o.interface);
    this.#exit = null;
    await this.#device?.down();
    await run('nft', ['-f', '-'], this.#filter.deleteTable().join('\n') + '\n').catch(() => undefined);
    rmSync(this.#graceFile(), { force: true });
  }

  #dir(): string {
    if (!this.#stateDir) throw new MeshpError('MESHP_PLUGIN_INVALID', 'tunnel-wireguard is used before it was applied to a host');
    return this.#stateDir;
  }

  #graceFile(): string {
    return join(this.#dir(), `${this.#o.interface}.grace.json`);
  }

  #enqueue(what: string, fn: () => Promise<void>): void {
    this.#chain = this.#chain.then(async () => {
      if (this.#left || (this.#closed && what !== 'attach')) return;
      try {
        await fn();
        this.#lastError = null;
      } catch (e) {
        this.#lastError = oneLine(e);
        this.#log.error({ interface: this.#o.interface, what, err: this.#lastError }, 'tunnel change refused');
      }
    });
  }

  /** The whole interface from the view: after a start or restart. */
  async #sync(): Promise<void> {
    const view = this.#view!;
    this.publicKey();
    const device = (this.#device ??= await openDevice({
      ifname: this.#o.interface,
      stateDir: this.#dir(),
      keyFile: this.#key!.file,
      implementation: this.#o.implementation ?? 'auto',
      ...(this.#o.wireguardGo ? { binary: this.#o.wireguardGo } : {}),
    }));
    await device.up();
    const settings = settingsOf(view.components, this.#o);
    await configureLink(this.#o.interface, settings, null);
    this.#settings = settings;
    const state = await device.get();
    const onDevice = new Map(state.peers.map((p) => [p.publicKey, p]));
    this.#routed = routedPrefixes(view.components);
    this.#relays.follow(view.components.relays);
    await this.#relays.prepare([...view.peers.values()].map(({ peer }) => relayedOf(peer.endpoints)));
    const { ops, wanted } = this.#peerOps(view, settings, onDevice);
    this.#resumeGrace(view, settings, wanted, onDevice);
    for (const key of onDevice.keys()) if (!wanted.has(key)) ops.push({ remove: key });
    await this.#nft(
      this.#filter.rebuild(
        view.components.filter,
        [...view.peers.values()].map((e) => e.peer),
        foundationPorts(view.components),
        servedGroups(view.components),
      ),
    );
    const change: DeviceChange = { peers: ops };
    if (state.privateKey !== this.#key!.privateKey) change.privateKey = this.#key!.privateKey;
    if (state.listenPort !== settings.listenPort) change.listenPort = settings.listenPort;
    await device.set(change);
    await this.#kernelRoutes(await kernelRoutes(this.#o.interface));
    writeGrace(this.#graceFile(), this.#grace.values());
    this.#applied = view.version;
    this.#log.info(
      {
        interface: this.#o.interface,
        implementation: device.implementation,
        pid: device.pid,
        adopted: device.adopted,
        peers: this.#configured.size,
        changed: ops.length,
      },
      'tunnel attached',
    );
  }

  /** What the device must be told so its peers are the view's, and the keys the view wants. */
  #peerOps(view: ViewSource, settings: TunnelSettings, onDevice: Map<string, DevicePeer>): { ops: PeerOp[]; wanted: Set<string> } {
    const ops: PeerOp[] = [];
    const wanted = new Set<string>();
    this.#configured.clear();
    for (const { peer } of view.peers.values()) {
      const d0 = peer.tunnelKey ? onDevice.get(peer.tunnelKey) : undefined;
      const made = this.#made(peer, settings);
      if (!made) continue;
      // After a restart: the candidate the device uses (chosen, or roamed to) is kept.
      const conf = this.#chosen(peer.id, made, d0?.endpoint);
      wanted.add(conf.publicKey);
      this.#configured.set(peer.id, conf);
      const d = onDevice.get(conf.publicKey);
      const same =
        d &&
        sameConfig(
          { publicKey: d.publicKey, allowedIps: [...d.allowedIps].sort(), keepalive: d.persistentKeepalive, ...(d.endpoint ? { endpoint: d.endpoint } : {}) },
          { ...conf, allowedIps: [...conf.allowedIps].sort() },
        );
      if (!same) ops.push({ upsert: conf });
    }
    return { ops, wanted };
  }

  /** Peers in grace when the process stopped, still on the device and not back in the view: kept, blocked, until their time is up. */
  #resumeGrace(view: ViewSource, settings: TunnelSettings, wanted: Set<string>, onDevice: Map<string, DevicePeer>): void {
    const now = Date.now();
    for (const g of readGrace(this.#graceFile())) {
      if (g.until <= now || view.peer(g.id) || wanted.has(g.publicKey) || !onDevice.has(g.publicKey)) continue;
      wanted.add(g.publicKey);
      this.#configured.set(g.id, { publicKey: g.publicKey, allowedIps: g.addresses, keepalive: settings.keepalive });
      this.#filter.block(g.id, g.addresses);
      this.#startGrace(g);
    }
  }

  async #onChange(change: ViewChange): Promise<void> {
    const view = this.#view!;
    const device = this.#device;
    // Not up yet (its attach failed: wireguard-go could not start): the whole interface again, not a delta on nothing.
    if (!device || !this.#settings) return this.#sync();
    const nft: string[] = [];
    const ops: PeerOp[] = [];
    const out: DeviceChange = { peers: ops };
    const settings = await this.#settingsChange(view, change, out, ops);
    if (change.components.includes('relays') || change.fromVersion === 0) this.#relays.follow(view.components.relays);
    await this.#relays.prepare(change.upserted.map((id) => relayedOf(view.peer(id)?.endpoints ?? [])));
    this.#routesMoved(view, change, settings, ops);
    // A snapshot or a large change: one table rebuilt from the view costs less than thousands of
    // element commands — and then no peer's element commands are made only to be thrown away
    // (at 10,000 peers that was a third of a snapshot's time, bench/tunnel-wireguard).
    const foundation = foundationPorts(view.components);
    const rebuild =
      change.components.includes('filter') ||
      change.components.includes('routeGroups') ||
      change.fromVersion === 0 ||
      change.upserted.length + change.removed.length + change.unscoped.length > 256 ||
      foundation.join() !== this.#filter.foundation.join();
    let graceChanged = this.#peersGone(change, nft, ops);
    graceChanged = this.#peersUpserted(view, change, settings, rebuild ? null : nft, ops) || graceChanged;
    // Drops first: an unscoped peer is cut off before anything else moves.
    await this.#nft(
      rebuild
        ? this.#filter.rebuild(
            view.components.filter,
            [...view.peers.values()].map((e) => e.peer),
            foundation,
            servedGroups(view.components),
          )
        : nft,
    );
    await device.set(out);
    if (this.#routed.size || this.#routes.size || this.#exit) await this.#kernelRoutes(this.#routes);
    if (graceChanged) writeGrace(this.#graceFile(), this.#grace.values());
    this.#applied = change.toVersion;
  }

  /**
   * The route groups moved (a group given or taken, a new primary): the peers whose prefixes changed
   * are configured again, an old primary losing them as the new one gains them in the same device
   * call (peers upserted or removed in this change are configured by their own step, with the new map).
   */
  #routesMoved(view: ViewSource, change: ViewChange, settings: TunnelSettings, ops: PeerOp[]): void {
    this.#routedWas = this.#routed;
    if (!change.components.includes('routeGroups') && change.fromVersion !== 0) return;
    const before = this.#routed;
    this.#routed = routedPrefixes(view.components);
    const own = new Set([...change.upserted, ...change.removed, ...change.unscoped]);
    for (const id of new Set([...before.keys(), ...this.#routed.keys()])) {
      if (own.has(id) || this.#grace.has(id) || samePrefixes(before.get(id), this.#routed.get(id))) continue;
      const peer = view.peer(id);
      const made = peer ? this.#made(peer, settings) : null;
      const conf = made && this.#chosen(id, made, this.#configured.get(id)?.endpoint);
      if (!conf || !this.#configured.has(id)) continue;
      ops.push({ upsert: conf });
      this.#configured.set(id, conf);
    }
  }

  /**
   * The kernel's routes into the interface made the prefixes of the primaries configured now; an exit
   * node's default routes never go into main but into the mesh's own table with its rules (exit-routes.ts).
   */
  async #kernelRoutes(have: ReadonlySet<string>): Promise<void> {
    const wanted = new Set<string>();
    const defaults = new Set<string>();
    let via = '';
    for (const [id, prefixes] of this.#routed)
      if (this.#configured.has(id) && !this.#grace.has(id))
        for (const p of prefixes) {
          if (!p.endsWith('/0')) {
            wanted.add(p);
            continue;
          }
          defaults.add(p);
          via = id;
        }
    await setKernelRoutes(this.#o.interface, have, wanted);
    this.#routes = wanted;
    const families = familiesOf(defaults);
    const bypass = families.length ? await bypassAddresses(this.#o.exitBypass ?? []) : [];
    await setExitRoutes({ ifname: this.#o.interface, stateDir: this.#dir(), families, bypass });
    const group = (this.#view?.components.routeGroups?.groups ?? []).find((g) => g.viaPeers[0] === via && g.prefixes.some((p) => p.endsWith('/0')));
    const next = families.length ? { group: group?.name ?? '', via, families } : null;
    if (JSON.stringify(next) !== JSON.stringify(this.#exit))
      this.#log.info({ interface: this.#o.interface, exit: next }, next ? 'exit node used' : 'no exit node used');
    this.#exit = next;
  }

  /** The interface's own settings (address, range, MTU, port, keepalive) as the view has them now. */
  async #settingsChange(view: ViewSource, change: ViewChange, out: DeviceChange, ops: PeerOp[]): Promise<TunnelSettings> {
    let settings = this.#settings!;
    if (change.components.includes('tunnel') || change.components.includes('declaration')) {
      const next = settingsOf(view.components, this.#o);
      if (next.address !== settings.address || next.range !== settings.range || next.mtu !== settings.mtu)
        await configureLink(this.#o.interface, next, settings);
      if (next.listenPort !== settings.listenPort) out.listenPort = next.listenPort;
      if (next.keepalive !== settings.keepalive) {
        for (const [id, c] of this.#configured) if (!this.#grace.has(id)) ops.push({ upsert: Object.assign(c, { keepalive: next.keepalive }) });
      }
      this.#settings = settings = next;
    }
    return settings;
  }

  /** Removed peers go; unscoped ones are blocked and kept for the grace period. Answers whether the grace list changed. */
  #peersGone(change: ViewChange, nft: string[], ops: PeerOp[]): boolean {
    let graceChanged = false;
    for (const id of change.removed) {
      graceChanged = this.#endGrace(id, nft) || graceChanged;
      const conf = this.#configured.get(id);
      if (conf) ops.push({ remove: conf.publicKey });
      // Its relayed path goes with it: the socket now, the permission lapses on the relay.
      this.#relays.drop(conf?.relayed);
      this.#onRelay.delete(id);
      this.#configured.delete(id);
      nft.push(...this.#filter.remove(id));
    }
    for (const id of change.unscoped) {
      let conf = this.#configured.get(id);
      nft.push(...this.#filter.remove(id));
      // Out of scope: no relayed path to it either (the filter blocks it for its grace).
      this.#relays.drop(conf?.relayed);
      if (!conf || this.#grace.has(id)) continue;
      // A primary unscoped loses the prefixes it carried: its grace blocks its own addresses, never a
      // route group's prefixes (an exit node's 0.0.0.0/0 blocked would cut every peer off).
      const carried = new Set(this.#routedWas.get(id) ?? []);
      if (carried.size) {
        conf = { ...conf, allowedIps: conf.allowedIps.filter((a) => !carried.has(a)) };
        ops.push({ upsert: conf });
        this.#configured.set(id, conf);
      }
      nft.push(...this.#filter.block(id, conf.allowedIps));
      this.#startGrace({ id, publicKey: conf.publicKey, addresses: conf.allowedIps, until: Date.now() + this.#o.graceMs });
      graceChanged = true;
    }
    return graceChanged;
  }

  /**
   * Upserted peers configured (a peer back in scope ends its grace). Answers whether the grace list
   * changed. `nft` null: the table is rebuilt from the view after this, so no element commands are made.
   */
  #peersUpserted(view: ViewSource, change: ViewChange, settings: TunnelSettings, nft: string[] | null, ops: PeerOp[]): boolean {
    const unblocked: string[] = [];
    let graceChanged = false;
    for (const id of change.upserted) {
      const peer = view.peer(id);
      if (!peer) continue;
      graceChanged = this.#endGrace(id, nft ?? unblocked) || graceChanged;
      const old = this.#configured.get(id);
      const made = this.#made(peer, settings);
      if (old?.relayed && old.relayed !== made?.relayed) this.#relays.drop(old.relayed);
      // A candidate chosen before (it handshaked, or is being tried) stays while the peer still has it.
      const conf = made && this.#chosen(id, made, old?.endpoint);
      if (old && old.publicKey !== conf?.publicKey) ops.push({ remove: old.publicKey });
      if (!conf) {
        this.#configured.delete(id);
        this.#log.warn({ peer: id }, 'peer has no tunnel key: not configured');
      } else {
        if (!sameConfig(old, conf)) ops.push({ upsert: conf });
        this.#configured.set(id, conf);
      }
      if (nft) nft.push(...this.#filter.upsert(peer));
    }
    return graceChanged;
  }

  /**
   * The endpoint the peer is configured with (keepChosen: the one in use while it is a candidate),
   * and a peer on the relay stays on it through a new allocation (a relay restarted: its new socket,
   * not its first direct candidate again, which had no path). Remembered while an allocation is held.
   */
  #chosen(id: string, made: PeerConfig, inUse: string | undefined): PeerConfig {
    const local = this.#relays.localFor(made);
    const conf = local && this.#onRelay.has(id) ? { ...made, endpoint: local } : keepChosen(made, inUse);
    if (local) {
      if (conf.endpoint === local) this.#onRelay.add(id);
      else this.#onRelay.delete(id);
    }
    return conf;
  }

  /** The peer's config: its direct candidates, then its relayed path when this node holds an allocation (relay-paths.ts). */
  #made(peer: Peer, settings: TunnelSettings): PeerConfig | null {
    const made = peerConfig(peer, settings.keepalive, this.#routed.get(peer.id));
    return made && this.#relays.withRelay(made);
  }

  /**
   * The allocation came or went (made, lost with the relay, or the relay removed): every peer's
   * candidates made again; one whose endpoint was the relayed path gone starts again on its first.
   */
  async #relayMoved(): Promise<void> {
    const view = this.#view;
    const settings = this.#settings;
    if (!view || !settings || !this.#device) return;
    await this.#relays.prepare([...this.#configured.values()].map((c) => c.relayed));
    const ops: PeerOp[] = [];
    for (const [id, old] of this.#configured) {
      const peer = view.peer(id);
      if (!peer || this.#grace.has(id)) continue;
      const made = this.#made(peer, settings);
      const conf = made && this.#chosen(id, made, old.endpoint);
      if (!conf) continue;
      if (!sameConfig(old, conf) || (old.candidates ?? []).join() !== (conf.candidates ?? []).join()) ops.push({ upsert: conf });
      this.#configured.set(id, conf);
    }
    if (ops.length) await this.#device.set({ peers: ops });
  }

  #startGrace(g: GraceEntry): void {
    const timer = setTimeout(() => this.#enqueue('grace', () => this.#expire(g.id)), Math.max(0, g.until - Date.now()));
    timer.unref();
    this.#grace.set(g.id, { ...g, timer });
  }

  /** The peer is back in scope, or removed: no longer in grace, its traffic no longer blocked. */
  #endGrace(id: string, nft: string[]): boolean {
    const g = this.#grace.get(id);
    if (!g) return false;
    clearTimeout(g.timer);
    this.#grace.delete(id);
    nft.push(...this.#filter.unblock(id));
    return true;
  }

  async #expire(id: string): Promise<void> {
    const g = this.#grace.get(id);
    if (!g || g.until > Date.now() || !this.#device) return;
    const nft: string[] = [];
    this.#endGrace(id, nft);
    this.#configured.delete(id);
    await this.#device.set({ peers: [{ remove: g.publicKey }] });
    await this.#nft(nft);
    writeGrace(this.#graceFile(), this.#grace.values());
    this.#log.info({ interface: this.#o.interface, peer: id }, 'grace period over: peer removed');
  }

  async #nft(lines: string[]): Promise<void> {
    if (this.#o.filter === false || lines.length === 0) return;
    await run('nft', ['-f', '-'], lines.join('\n') + '\n');
  }
}

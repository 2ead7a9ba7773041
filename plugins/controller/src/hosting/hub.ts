/**
 * The Sync streams the controller holds, one per node, by network: who is connected and was last
 * heard from, what each node acked since its report, and the fan-out of a change. A change pumps
 * only the streams it concerns: `poke` asks the controller whom the changes since the network's
 * last fan-out concern (core's scope.ts, through its indexes) and queues those (fanout.ts); every
 * stream of the network only on its first fan-out here, when whom cannot be bounded (a shared
 * component, a control node, a log that no longer reaches back) or when they are as many. What one
 * connection may open and send is counted in stream-limits.ts.
 */
import type { ReportMessage } from '@meshp/core';
import type { Controller } from '../controller.js';
import type { AuthBook } from './auth-store.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { FanOut, type FanOutOptions } from './fanout.js';
import { HANDSHAKE_STALE_SECONDS, checkHandshakeStale } from '../handshake-status.js';
import type { Liveness } from '../status.js';
import { ConnectionLimits, STREAMS_PER_CONNECTION } from './stream-limits.js';
import { SyncSession, type Channel, type SessionHost } from './session.js';

/** Acks kept per node for doctor (as many deltas as the controller keeps sent: keepSent). */
const ACKS_KEPT = 8;

export interface SessionHubOptions {
  /** How the fan-out of a change is cut into turns of the event loop (fanout.ts). */
  fanout?: FanOutOptions;
  /** Sync streams one connection may hold at once (default 4: one agent, a reconnect overlapping). */
  streamsPerConnection?: number;
  /** A tunnel member none of whose peers handshaked within this many seconds is `no-handshake` (default HANDSHAKE_STALE_SECONDS). */
  handshakeStaleSeconds?: number;
}

export class SessionHub implements SessionHost {
  readonly #sessions = new Map<string, SyncSession>();
  #stopping = false;
  /** When each node's agent was last heard from (any message on an authenticated stream). */
  readonly #seen = new Map<string, string>();
  /** When each node's last stream ended (the last time it was known open). */
  readonly #ended = new Map<string, string>();
  readonly #handshakeStaleSeconds: number;
  readonly #limits: ConnectionLimits;
  /** The authenticated streams of each network: a change pokes some of those, never another network's. */
  readonly #byNetwork = new Map<string, Set<SyncSession>>();
  readonly fanout: FanOut;

  constructor(
    readonly controller: Controller,
    readonly auth: AuthBook,
    readonly metrics: Metrics,
    readonly log: Logger,
    options: SessionHubOptions = {},
  ) {
    // One line per fan-out and network (each agent's delta is a debug line: session.ts pump).
    this.fanout = new FanOut(options.fanout, (tallies) => {
      for (const t of tallies) log.info(t, 'fan-out sent');
    });
    this.#limits = new ConnectionLimits(options.streamsPerConnection ?? STREAMS_PER_CONNECTION);
    this.#handshakeStaleSeconds = checkHandshakeStale(options.handshakeStaleSeconds ?? HANDSHAKE_STALE_SECONDS);
  }

  /** The no-handshake limit (seconds) the statuses are computed with. */
  get handshakeStaleSeconds(): number {
    return this.#handshakeStaleSeconds;
  }

  get connected(): number {
    return this.#sessions.size;
  }

  open(channel: Channel, peer: string): void {
    const admitted = this.#limits.open(peer);
    const session = new SyncSession(this, channel, peer);
    if ('refused' in admitted) {
      session.refuse(admitted.refused);
      return;
    }
    session.start(admitted.closed);
  }

  /** A hello on `peer`'s connection: refused past the window's allowance. */
  hello(peer: string): void {
    this.#limits.hello(peer);
  }

  /** A resync request on `peer`'s connection: refused past the window's allowance (a new stream does not reset it). */
  resync(peer: string): void {
    this.#limits.resync(peer);
  }

  register(s: SyncSession): void {
    const key = `${s.network}/${s.node}`;
    const old = this.#sessions.get(key);
    this.#sessions.set(key, s);
    this.#index(s);
    old?.end({ code: 'MESHP_UNAVAILABLE', message: 'a newer stream of this node replaced this one' });
    if (!old) this.#routeLiveness(s.network, s.node, true);
  }

  /**
   * A via node's stream opened or ended (issue 26): the route groups it serves fail over, through the
   * controller's change path like any change, and the nodes they concern are pumped. Up is a stream
   * open on this controller (a replica knows only its own streams).
   */
  #routeLiveness(network: string, node: string, up: boolean): void {
    const { controller } = this;
    if (this.#stopping || !controller.networks().includes(network) || !controller.servesRoutes(network, node)) return;
    const before = () => new Map(controller.routeGroups(network).map((g) => [g.group.name, g.primary]));
    let was = new Map<string, string>();
    const move = () => {
      was = before();
      return controller.routeLiveness(network, node, up, (id) => this.#sessions.has(`${network}/${id}`));
    };
    const moved = (primaries: Record<string, string> | null) => {
      if (!primaries) return;
      const n = Object.entries(primaries).filter(([g, v]) => was.get(g) !== v).length;
      this.metrics.routeFailovers += n;
      if (n) this.metrics.lastRouteFailover = Math.floor(Date.now() / 1000);
      this.log.info({ network, node, up, primaries }, 'route group primary moved');
      this.poke(network);
    };
    const refused = (e: unknown) => this.log.warn({ network, node, err: e instanceof Error ? e.message : String(e) }, 'route group failover refused');
    if (controller.asyncStore) void controller.change(move).then(moved, refused);
    else {
      try {
        moved(move());
      } catch (e) {
        refused(e);
      }
    }
  }

  /** The last acks of each node (version and hash), newest last: what it applied, between its reports. */
  readonly #acks = new Map<string, { fromVersion: number; toVersion: number; stateHash: string }[]>();

  acked(network: string, node: string, version: number, stateHash: string): void {
    const key = `${network}/${node}`;
    const list = this.#acks.get(key) ?? [];
    if (list.at(-1)?.toVersion === version) return;
    list.push({ fromVersion: list.at(-1)?.toVersion ?? 0, toVersion: version, stateHash });
    if (list.length > ACKS_KEPT) list.splice(0, list.length - ACKS_KEPT);
    this.#acks.set(key, list);
  }

  /**
   * The node's last report with what it acked since: an agent reports when its host's facts change
   * and acks every version it reconciled, so the report stands for the last version acked, and the
   * deltas applied (for doctor) are the report's and the acks'.
   */
  reportOf(network: string, node: string): ReportMessage | null {
    const r = this.auth.report(network, node);
    const acks = this.#acks.get(`${network}/${node}`);
    if (!r || !acks?.length) return r;
    const byVersion = new Map((r.applied ?? []).map((a) => [a.toVersion, a]));
    for (const a of acks) if (!byVersion.has(a.toVersion)) byVersion.set(a.toVersion, a);
    const applied = [...byVersion.values()].sort((a, b) => a.toVersion - b.toVersion).slice(-ACKS_KEPT);
    return { ...r, appliedVersion: Math.max(r.appliedVersion, acks.at(-1)!.toVersion), applied };
  }

  /** The agent spoke: it is alive now. */
  seen(network: string, node: string): void {
    this.#seen.set(`${network}/${node}`, new Date().toISOString());
  }

  /**
   * Whether the node's stream is open, when it last sent a message ('' never, since this controller
   * started), and when it was last known there: now while its stream is open (grpc-js pings it every
   * 20 s and ends the connection when a ping is not answered within 10 s), else when its stream ended.
   */
  live(network: string, node: string): Liveness {
    const key = `${network}/${node}`;
    const connected = this.#sessions.has(key);
    const now = Date.now();
    return {
      connected,
      lastSeen: this.#seen.get(key) ?? '',
      lastContact: connected ? new Date(now).toISOString() : (this.#ended.get(key) ?? this.#seen.get(key) ?? ''),
      now,
      handshakeStaleSeconds: this.#handshakeStaleSeconds,
    };
  }

  unregister(s: SyncSession): void {
    const key = `${s.network}/${s.node}`;
    if (this.#sessions.get(key) === s) {
      this.#sessions.delete(key);
      this.#ended.set(key, new Date().toISOString());
      this.#routeLiveness(s.network, s.node, false);
    }
    this.#byNetwork.get(s.network)?.delete(s);
    this.fanout.drop(s);
  }

  #index(s: SyncSession): void {
    let set = this.#byNetwork.get(s.network);
    if (!set) this.#byNetwork.set(s.network, (set = new Set()));
    set.add(s);
  }

  /** The node's stream, if one is open, ends with this error (a removed node). */
  endNode(network: string, node: string, error: { code: string; message: string }): void {
    // Nothing of a removed node stays behind (nodes come and go: an entry each would add up).
    this.#acks.delete(`${network}/${node}`);
    this.#seen.delete(`${network}/${node}`);
    this.#sessions.get(`${network}/${node}`)?.end(error);
    this.#ended.delete(`${network}/${node}`);
  }

  /** Told when a node's expiry moved or came (the hosting's expiry clock: expiry-clock.ts); `at`: the new expiry, when one. */
  onExpiryMoved: (at?: number) => void = () => undefined;

  /** A node's expiry moved; `expiresAt`: its new one (ISO), when it got one, so the clock need not look at every member. */
  expiryMoved(expiresAt?: string): void {
    const at = expiresAt ? Date.parse(expiresAt) : NaN;
    this.onExpiryMoved(Number.isFinite(at) ? at : undefined);
  }

  /** Asks the node's agent for a new tunnel key on its open stream (meshp node rekey); false: none is open here. */
  rekey(network: string, node: string, id: string): boolean {
    const s = this.#sessions.get(`${network}/${node}`);
    return s ? s.rekey(id) : false;
  }

  /** The node's open stream goes on under its new name. */
  renamed(network: string, from: string, to: string): void {
    const acks = this.#acks.get(`${network}/${from}`);
    this.#acks.delete(`${network}/${from}`);
    if (acks) this.#acks.set(`${network}/${to}`, acks);
    const seen = this.#seen.get(`${network}/${from}`);
    this.#seen.delete(`${network}/${from}`);
    if (seen) this.#seen.set(`${network}/${to}`, seen);
    const ended = this.#ended.get(`${network}/${from}`);
    this.#ended.delete(`${network}/${from}`);
    if (ended) this.#ended.set(`${network}/${to}`, ended);
    const s = this.#sessions.get(`${network}/${from}`);
    if (!s) return;
    this.#sessions.delete(`${network}/${from}`);
    s.node = to;
    this.#sessions.set(`${network}/${to}`, s);
  }

  /**
   * Something changed in the network: the streams of the nodes the changes since its last fan-out
   * concern are pumped (all of them on the network's first fan-out here, or when whom cannot be
   * bounded; none when its version has not moved). Only queued (fanout.ts): the call that made the
   * change (an Enrol, an admin call) is answered before any delta goes out.
   */
  poke(network: string): void {
    // Asked from inside a change's transaction (an admin change and its audit row): once it committed.
    // Noted now, a version the rollback then took away would hide the next change's (since >= version).
    this.controller.afterCommit(() => this.#poke(network));
  }

  #poke(network: string): void {
    // Its change is being committed (a store across the network): the fan-out waits for the answer (`settled`).
    if (this.controller.settling(network)) return void this.#heldPokes.add(network);
    const streams = this.#byNetwork.get(network);
    const version = this.controller.networks().includes(network) ? this.controller.stateVersion(network) : 0;
    const since = this.#fannedAt.get(network);
    this.#fannedAt.set(network, version);
    if (!streams) return;
    // Only the nodes the changes since the last fan-out concern (scope.ts), found through the indexes.
    const ids = since === undefined ? null : since >= version ? new Set<string>() : this.controller.affectedSince(network, since);
    if (ids === null || ids.size >= streams.size) return this.fanout.add(streams);
    // The others keep their view and are not looked at: the controller noted whom each change concerned (sync.ts noteChange).
    const some: SyncSession[] = [];
    for (const id of ids) {
      const s = this.#sessions.get(`${network}/${id}`);
      if (s) some.push(s);
    }
    this.fanout.add(some);
  }

  /** The network's version at its last fan-out: the next one covers the changes after it. */
  readonly #fannedAt = new Map<string, number>();

  /** Networks poked while their change was being committed, and the streams that asked for a pump meanwhile. */
  readonly #heldPokes = new Set<string>();
  readonly #heldPumps = new Map<string, Set<SyncSession>>();

  /** A stream's pump that came while its network's change was being committed: pumped once it is answered. */
  holdPump(s: SyncSession): void {
    const held = this.#heldPumps.get(s.network) ?? new Set<SyncSession>();
    held.add(s);
    this.#heldPumps.set(s.network, held);
  }

  /** The network's change was committed or put back: the fan-out and the pumps held for it go now. */
  settled(network: string): void {
    if (this.controller.settling(network)) return;
    if (this.#heldPokes.delete(network)) this.#poke(network);
    const held = this.#heldPumps.get(network);
    this.#heldPumps.delete(network);
    if (held) this.fanout.add([...held]);
  }

  closeAll(): void {
    // The controller stopping is not every via node going down: no primary moves on the way out.
    this.#stopping = true;
    for (const s of [...this.#sessions.values()]) s.end({ code: 'MESHP_UNAVAILABLE', message: 'the controller is stopping' });
  }
}

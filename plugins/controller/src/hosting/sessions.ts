/**
 * The Sync streams the controller holds: one per node. Each starts with a challenge the node signs
 * with its enrolled key; its Hello says where it is, and deltas resume from there (or a snapshot).
 * Any change to a network pumps every stream of that network.
 */
import { createPublicKey, randomBytes, verify } from 'node:crypto';
import { MeshpError, isMeshpError, type ReportMessage, type AgentMessage, type ControllerMessage, type HelloMessage, type SyncChannel } from '@meshp/core';
import { challengePayload } from '@meshp/core/agent';
import { oneLine } from '@meshp/core/util';
import type { Controller } from '../controller.js';
import { splitForWire } from '../limits.js';
import { observedEndpoint, type ReportedState } from '@meshp/core/delta';
import type { AuthBook } from './auth-store.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { FanOut, type FanOutOptions } from './fanout.js';
import { HANDSHAKE_STALE_SECONDS, checkHandshakeStale, reportedHandshakes } from '../handshake-status.js';
import type { Liveness } from '../status.js';

const HELLO_TIMEOUT_MS = 10_000;
/** Acks kept per node for doctor (as many deltas as the controller keeps sent: keepSent). */
const ACKS_KEPT = 8;
/** Resync requests one connection may send in a window; more ends the stream (MESHP_RATE_LIMITED). */
const RESYNCS_PER_WINDOW = 10;
const RESYNC_WINDOW_MS = 60_000;
/**
 * Per connection (one HTTP/2 connection: the peer's address and port): Sync streams open at once
 * (an agent needs one; a reconnect may overlap the old one), and hellos in a window — each costs a
 * signature check and, with another hash, a snapshot. More is refused MESHP_RATE_LIMITED. A proxy
 * that carries many agents over one connection raises the streams (`streamsPerConnection`); the
 * hellos and resyncs allowed grow with it, per stream as for one agent's connection.
 */
export const STREAMS_PER_CONNECTION = 4;
const HELLOS_PER_STREAM = 5;
const HELLO_WINDOW_MS = 60_000;

/** `streamsPerConnection` as given, or MESHP_USAGE: a whole number of at least 1 (the CLI checks it before anything is made). */
export function checkStreamsPerConnection(k: number): number {
  if (!Number.isInteger(k) || k < 1) throw new MeshpError('MESHP_USAGE', `--streams-per-connection must be a whole number of at least 1, not ${k}`);
  return k;
}

export interface SessionHubOptions {
  /** How the fan-out of a change is cut into turns of the event loop (fanout.ts). */
  fanout?: FanOutOptions;
  /** Sync streams one connection may hold at once (default 4: one agent, a reconnect overlapping). */
  streamsPerConnection?: number;
  /** A tunnel member none of whose peers handshaked within this many seconds is `no-handshake` (default HANDSHAKE_STALE_SECONDS). */
  handshakeStaleSeconds?: number;
}

interface Connection {
  open: number;
  hellos: number[];
  resyncs: number[];
}

type Channel = SyncChannel<AgentMessage, ControllerMessage>;

export class SessionHub {
  readonly #sessions = new Map<string, SyncSession>();
  /** When each node's agent was last heard from (any message on an authenticated stream). */
  readonly #seen = new Map<string, string>();
  /** When each node's last stream ended (the last time it was known open). */
  readonly #ended = new Map<string, string>();
  readonly #handshakeStaleSeconds: number;
  readonly #connections = new Map<string, Connection>();
  readonly #streamsPerConnection: number;
  /** The authenticated streams of each network: a change pokes those only. */
  readonly #byNetwork = new Map<string, Set<SyncSession>>();
  readonly fanout: FanOut;

  constructor(
    readonly controller: Controller,
    readonly auth: AuthBook,
    readonly metrics: Metrics,
    readonly log: Logger,
    options: SessionHubOptions = {},
  ) {
    this.fanout = new FanOut(options.fanout);
    this.#streamsPerConnection = checkStreamsPerConnection(options.streamsPerConnection ?? STREAMS_PER_CONNECTION);
    this.#handshakeStaleSeconds = checkHandshakeStale(options.handshakeStaleSeconds ?? HANDSHAKE_STALE_SECONDS);
  }

  /** The no-handshake limit (seconds) the statuses are computed with. */
  get handshakeStaleSeconds(): number {
    return this.#handshakeStaleSeconds;
  }

  get connected(): number {
    return this.#sessions.size;
  }

  /**
   * Streams opened since the connections without a stream were last forgotten: that looks at every
   * connection, so it is done once per as many opens as there are connections (O(1) an open, not
   * O(N): at 10,000 agents it was 5 ms a stream, and a removal's agent retries a few). An entry kept
   * longer changes nothing: its windows count only what is recent.
   */
  #opens = 0;

  open(channel: Channel, peer: string): void {
    const now = Date.now();
    if (++this.#opens >= this.#connections.size) {
      this.#opens = 0;
      for (const [k, c] of this.#connections) if (c.open === 0 && !c.hellos.some((x) => x > now - HELLO_WINDOW_MS) && !c.resyncs.some((x) => x > now - RESYNC_WINDOW_MS)) this.#connections.delete(k);
    }
    const c = this.#connections.get(peer) ?? { open: 0, hellos: [], resyncs: [] };
    this.#connections.set(peer, c);
    const session = new SyncSession(this, channel, peer);
    if (c.open >= this.#streamsPerConnection) {
      session.refuse(new MeshpError('MESHP_RATE_LIMITED', `more than ${this.#streamsPerConnection} Sync streams open at once on one connection`));
      return;
    }
    c.open++;
    session.start(() => c.open--);
  }

  /** A hello on `peer`'s connection: refused past the window's allowance. */
  hello(peer: string): void {
    this.#count(peer, 'hellos', HELLOS_PER_STREAM * this.#streamsPerConnection, HELLO_WINDOW_MS, 'hellos');
  }

  /** A resync request on `peer`'s connection: refused past the window's allowance (a new stream does not reset it). */
  resync(peer: string): void {
    this.#count(peer, 'resyncs', Math.ceil((RESYNCS_PER_WINDOW * this.#streamsPerConnection) / STREAMS_PER_CONNECTION), RESYNC_WINDOW_MS, 'resync requests');
  }

  #count(peer: string, kind: 'hellos' | 'resyncs', max: number, windowMs: number, what: string): void {
    const c = this.#connections.get(peer);
    if (!c) return;
    const now = Date.now();
    c[kind] = [...c[kind].filter((x) => x > now - windowMs), now];
    if (c[kind].length > max) throw new MeshpError('MESHP_RATE_LIMITED', `more than ${max} ${what} in ${windowMs / 1000} s on one connection`);
  }

  register(s: SyncSession): void {
    const key = `${s.network}/${s.node}`;
    const old = this.#sessions.get(key);
    this.#sessions.set(key, s);
    this.#index(s);
    old?.end({ code: 'MESHP_UNAVAILABLE', message: 'a newer stream of this node replaced this one' });
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
    return { connected, lastSeen: this.#seen.get(key) ?? '', lastContact: connected ? new Date(now).toISOString() : (this.#ended.get(key) ?? this.#seen.get(key) ?? ''), now, handshakeStaleSeconds: this.#handshakeStaleSeconds };
  }

  unregister(s: SyncSession): void {
    const key = `${s.network}/${s.node}`;
    if (this.#sessions.get(key) === s) {
      this.#sessions.delete(key);
      this.#ended.set(key, new Date().toISOString());
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
   * Something changed in the network: every node there may have a delta. Only queued (fanout.ts):
   * the call that made the change (an Enrol, an admin call) is answered before any delta goes out.
   */
  poke(network: string): void {
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

  closeAll(): void {
    for (const s of [...this.#sessions.values()]) s.end({ code: 'MESHP_UNAVAILABLE', message: 'the controller is stopping' });
  }
}

export class SyncSession {
  network = '';
  node = '';
  #authed = false;
  #ended = false;
  readonly #nonce = randomBytes(32);
  #timer: ReturnType<typeof setTimeout> | null = null;
  /** A snapshot held back by the backoff: the pump that sends it. */
  #retry: ReturnType<typeof setTimeout> | null = null;
  #divergedSaid = false;

  constructor(
    private readonly hub: SessionHub,
    private readonly ch: Channel,
    private readonly peer: string,
  ) {}

  /** `closed`: called once when the stream ends (the hub's count of streams per connection). */
  start(closed: () => void = () => undefined): void {
    this.ch.onMessage((m) => {
      try {
        this.#receive(m);
      } catch (e) {
        this.#refuse(e);
      }
    });
    this.ch.onClose((error) => {
      this.#ended = true;
      closed();
      if (this.#timer) clearTimeout(this.#timer);
      if (this.#retry) clearTimeout(this.#retry);
      this.hub.unregister(this);
      if (this.#authed) this.hub.log.info({ network: this.network, node: this.node, peer: this.peer, code: error?.code, err: error?.message }, 'sync stream closed');
    });
    this.#timer = setTimeout(() => this.#refuse(new MeshpError('MESHP_AUTH_FAILED', 'no hello within 10 s')), HELLO_TIMEOUT_MS);
    this.ch.send({ challenge: this.#nonce });
  }

  end(error: { code: string; message: string }): void {
    if (this.#ended) return;
    this.#ended = true;
    this.ch.send({ error });
    this.ch.close(error);
  }

  /** Sends what the node is missing, if anything. */
  pump(): void {
    if (!this.#authed || this.#ended) return;
    const { controller, metrics } = this.hub;
    // A node removed while its stream was open: the stream ends, the change that removed it stands.
    if (!controller.member(this.network, this.node)) return this.#refuse(new MeshpError('MESHP_NODE_REVOKED', `node ${this.node} was removed from ${this.network}`));
    const delta = controller.deltaFor(this.network, this.node);
    if (!delta) return this.#held();
    this.#divergedSaid = false;
    const snapshot = delta.fromVersion === 0;
    if (snapshot) metrics.snapshotsSent++;
    else metrics.deltasSent++;
    // Parts packed by size, each under the message limit; what cannot fit is logged with its
    // code and not sent (the limits in limits.ts refuse the changes that would cause it).
    let parts;
    try {
      parts = splitForWire(delta);
    } catch (e) {
      this.hub.log.error({ network: this.network, node: this.node, fromVersion: delta.fromVersion, toVersion: delta.toVersion, code: isMeshpError(e) ? e.code : undefined, err: oneLine(e) }, 'delta not sent: over the message limit');
      return;
    }
    // Their size on the wire is counted by the transport as it encodes them (metrics.bytesSent).
    for (const part of parts) this.ch.send({ delta: part });
    this.hub.log.info({ network: this.network, node: this.node, fromVersion: delta.fromVersion, toVersion: delta.toVersion, snapshot, upserts: delta.upsertPeers.length, removals: delta.removePeers.length }, snapshot ? 'snapshot sent' : 'delta sent');
  }

  /** Nothing went: a snapshot waits for its backoff (pump again then), or the membership diverged (say so once). */
  #held(): void {
    const { retryAt, diverged } = this.hub.controller.snapshotHold(this.network, this.node);
    if (retryAt !== null && !this.#retry) {
      // +1 ms: a timer may fire up to a millisecond before the wall clock says its time has come.
      const wait = Math.max(0, retryAt - Date.now()) + 1;
      this.#retry = setTimeout(() => {
        this.#retry = null;
        this.pump();
      }, wait);
    }
    if (diverged && !this.#divergedSaid) {
      this.#divergedSaid = true;
      this.hub.metrics.refused('MESHP_DIVERGED');
      this.hub.log.warn({ network: this.network, node: this.node, peer: this.peer, code: 'MESHP_DIVERGED', err: diverged }, 'membership diverged: no more snapshots until an ack or a hello matches');
      // The agent is told (it keeps its last good view; the stream stays open): its next view change brings one snapshot again.
      this.ch.send({ error: { code: 'MESHP_DIVERGED', message: diverged } });
    }
    if (!diverged) this.#divergedSaid = false;
  }

  #receive(m: AgentMessage): void {
    if (this.#ended) return;
    const { controller } = this.hub;
    if (!this.#authed) {
      if (!('hello' in m)) throw new MeshpError('MESHP_AUTH_FAILED', 'the first message on a stream must be a signed hello');
      this.#hello(m.hello);
      return;
    }
    if ('hello' in m) throw new MeshpError('MESHP_USAGE', 'hello twice on one stream');
    if (!controller.member(this.network, this.node)) throw new MeshpError('MESHP_NODE_REVOKED', `node ${this.node} was removed from ${this.network}`);
    this.hub.seen(this.network, this.node);
    if ('ack' in m) {
      const r = controller.ack(this.network, this.node, m.ack.appliedVersion, m.ack.stateHash);
      if (r.accepted) this.hub.acked(this.network, this.node, m.ack.appliedVersion, m.ack.stateHash);
      if (!r.accepted) this.hub.log.warn({ network: this.network, node: this.node, appliedVersion: m.ack.appliedVersion }, 'ack hash differs from the view computed for that version: snapshot');
      // A snapshot now, one held back by the backoff, or none (diverged: #held says so).
      if (r.snapshotPending || !r.accepted) this.pump();
    } else if ('resync' in m) {
      this.hub.resync(this.peer);
      this.hub.log.warn({ network: this.network, node: this.node, reason: m.resync.reason, detail: m.resync.detail }, 'agent asked for a snapshot');
      controller.resync(this.network, this.node);
      this.pump();
    } else if ('report' in m) {
      const count = (s: string) => m.report.resources.filter((r) => r.state === s).length;
      const r = m.report;
      const refusedCodes: Record<string, number> = {};
      for (const x of r.resources) if (x.state === 'refused') refusedCodes[codeOf(x.reason)] = (refusedCodes[codeOf(x.reason)] ?? 0) + 1;
      const handshakes = reportedHandshakes(r, controller.reportedHandshakes(this.network, this.node), new Date().toISOString());
      const reported: ReportedState = {
        version: r.appliedVersion, mode: r.mode, at: r.at, refusedResources: count('refused'), refusedCodes,
        ...(handshakes ? { handshakes } : {}),
        ...(r.lifecycle ? { lifecycle: { state: r.lifecycle.state, previewId: r.lifecycle.previewId, code: r.lifecycle.code ?? '', message: r.lifecycle.message ?? '', at: r.lifecycle.at } } : {}),
        ...(r.reconcile ? { reconcile: { ...r.reconcile } } : {}),
        tunnel: { key: !!r.tunnelKey, interface: r.tunnelInterface ?? '', error: r.tunnelError ?? '' },
      };
      controller.report(this.network, this.node, { firewallKind: r.firewallKind || 'none', held: count('held'), changed: count('changed'), reported });
      this.hub.auth.putReport(this.network, this.node, m.report);
      // A tunnel key other than the stored one: a key change, sent on to every peer that sees this node.
      if (r.tunnelKey && r.tunnelKey !== controller.member(this.network, this.node)?.tunnelKey) {
        try {
          controller.setTunnelKey(this.network, this.node, r.tunnelKey);
          this.hub.log.info({ network: this.network, node: this.node }, 'tunnel key changed');
          this.hub.poke(this.network);
        } catch (e) {
          // Refused (another node's key, not a key): the stored key stays, the stream goes on.
          this.hub.log.warn({ network: this.network, node: this.node, code: isMeshpError(e) ? e.code : undefined, err: oneLine(e) }, 'tunnel key change refused');
        }
      }
    }
  }

  #hello(h: HelloMessage): void {
    const { auth, controller, log } = this.hub;
    this.hub.hello(this.peer);
    const owner = auth.nodeOf(h.credential);
    if (!owner) {
      // A removed node's agent, back after the removal: its hello is signed by a key revoked under
      // its name, so the answer is definite (the agent then leaves); any other unknown credential is not.
      const revoked = auth.revokedKeysOf(h.node).find((r) => signedBy(r.nodeKey, challengePayload(h.node, this.#nonce), h.signature));
      if (revoked) throw new MeshpError('MESHP_NODE_REVOKED', `node ${h.node} was removed from ${revoked.network} (${revoked.at}): its credential and key are revoked`);
      throw new MeshpError('MESHP_AUTH_FAILED', 'the node credential is not known (never issued, or revoked by node remove)');
    }
    // An agent that was offline while it was renamed still says its old name; the declaration tells it the new one.
    if (owner.node !== h.node && auth.renamedTo(owner.network, h.node) !== owner.node) {
      throw new MeshpError('MESHP_FORBIDDEN', `the credential of ${owner.node} asked for the state of ${h.node}`);
    }
    // Enrolled through another controller on the same database a moment ago: caught up first.
    if (!controller.member(owner.network, owner.node)) controller.refresh();
    const member = controller.member(owner.network, owner.node);
    if (!member) throw new MeshpError('MESHP_AUTH_FAILED', `node ${owner.node} is no longer in ${owner.network}`);
    // A deliberate break (proto/README.md): v1-r1's hello carries no signature, and a credential alone no longer syncs.
    if (!h.signature || h.signature.length === 0) throw new MeshpError('MESHP_AUTH_FAILED', `unsigned hello from ${h.node}: a v1-r1 agent (the v1-r2 controller needs the challenge signed with the node key; upgrade the agent, its key and credential stay valid)`);
    const good = signedBy(member.nodeKey, challengePayload(h.node, this.#nonce), h.signature);
    if (!good) throw new MeshpError('MESHP_AUTH_FAILED', `the hello of ${h.node} is not signed by its enrolled key`);
    if (this.#timer) clearTimeout(this.#timer);
    // Not kept: a cleared timer held for the stream's life is its Timeout and closure, per agent.
    this.#timer = null;
    this.network = owner.network;
    this.node = owner.node;
    this.#authed = true;
    this.hub.register(this);
    this.hub.seen(this.network, this.node);
    // A tunnel node's source address, as seen here, becomes an endpoint its peers are given (issue 16).
    const observed = member.tunnelKey ? observedEndpoint(this.peer, member.settings.ports['tunnel'] ?? 51820) : null;
    if (observed && observed !== member.observedEndpoint) {
      controller.updateMember(this.network, this.node, { observedEndpoint: observed });
      this.hub.poke(this.network);
    }
    // The node holds its credential: the token it enrolled with is spent for good.
    auth.confirm(this.network, this.node, new Date().toISOString());
    const r = controller.hello(this.network, this.node, h.appliedVersion, h.stateHash, h.versionSignature, h.revision);
    log.info({ network: this.network, node: this.node, peer: this.peer, appliedVersion: h.appliedVersion, resume: !r.snapshotPending }, 'sync stream opened');
    if (r.movedAhead) {
      log.warn(
        { network: this.network, node: this.node, appliedVersion: h.appliedVersion, from: r.movedAhead.from, to: r.movedAhead.to },
        "an agent had applied a version past this controller's: its state is an older copy (restored from a backup?); the network's version moved past it, every node gets a snapshot",
      );
      this.hub.poke(this.network);
    } else this.pump();
  }

  /** Ends the stream with the error's code, logged with the peer (also a stream refused before it starts). */
  refuse(e: unknown): void {
    this.#refuse(e);
  }

  #refuse(e: unknown): void {
    const code = isMeshpError(e) ? e.code : 'MESHP_PLUGIN_FAILED';
    this.hub.metrics.refused(code);
    this.hub.log.warn({ code, peer: this.peer, network: this.network || undefined, node: this.node || undefined, err: oneLine(e) }, 'sync refused');
    this.end({ code, message: isMeshpError(e) ? e.message : String(e) });
  }
}

/** A refused resource's code: what its reason begins with (MESHP_REFUSED when it names none). */
const codeOf = (reason: string | undefined): string => /^(MESHP_[A-Z0-9_]+)\b/.exec(reason ?? '')?.[1] ?? 'MESHP_REFUSED';

/** Whether `signature` is the node key's (SPKI DER, base64) over `payload`; a key or signature that does not parse is not. */
function signedBy(nodeKey: string, payload: Uint8Array, signature: Uint8Array | undefined): boolean {
  if (!signature || signature.length === 0) return false;
  try {
    return verify(null, payload, createPublicKey({ key: Buffer.from(nodeKey, 'base64'), format: 'der', type: 'spki' }), signature);
  } catch {
    return false;
  }
}

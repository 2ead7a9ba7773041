/**
 * One node's Sync stream. It starts with a challenge the node signs with its enrolled key; its
 * Hello says where it is, and deltas resume from there (or a snapshot). Then it takes the node's
 * acks, resync requests and reports, and sends what the node is missing when its hub's fan-out
 * pumps it (hub.ts: only the streams a change concerns).
 */
import { createPublicKey, randomBytes, verify } from 'node:crypto';
import {
  MeshpError,
  isMeshpError,
  type AckMessage,
  type AgentMessage,
  type ControllerMessage,
  type HelloFacts,
  type HelloMessage,
  type ReportMessage,
  type ResyncMessage,
  type SyncChannel,
} from '@meshp/core';
import { challengePayload } from '@meshp/core/agent';
import { malformed, oneLine } from '@meshp/core/util';
import type { Controller } from '../controller.js';
import type { StoredSync } from '../controller/sync-protocol.js';
import { splitForWire } from '../limits.js';
import { isControlNode, mappingsOf, observedEndpoint, type ReportedState } from '@meshp/core/delta';
import type { AuthBook } from './auth-store.js';
import type { Sent } from './fanout.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { reportedHandshakes } from '../handshake-status.js';
import { isStoreFault } from '../store-errors.js';

const HELLO_TIMEOUT_MS = 10_000;

export type Channel = SyncChannel<AgentMessage, ControllerMessage>;

/** What a stream needs of the hub that holds it (hub.ts SessionHub). */
export interface SessionHost {
  readonly controller: Controller;
  readonly auth: AuthBook;
  readonly metrics: Metrics;
  readonly log: Logger;
  /** A hello on `peer`'s connection (counted: stream-limits.ts). */
  hello(peer: string): void;
  /** A resync request on `peer`'s connection (counted: stream-limits.ts). */
  resync(peer: string): void;
  register(s: SyncSession): void;
  unregister(s: SyncSession): void;
  seen(network: string, node: string): void;
  acked(network: string, node: string, version: number, stateHash: string): void;
  poke(network: string): void;
  /** A pump that came while the network's change was being committed: pumped once it is answered. */
  holdPump(s: SyncSession): void;
  /** A node's expiry moved (or came): the expiry clock looks again (expiry-clock.ts). */
  expiryMoved(expiresAt?: string): void;
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
    private readonly hub: SessionHost,
    private readonly ch: Channel,
    private readonly peer: string,
  ) {}

  /** `closed`: called once when the stream ends (the hub's count of streams per connection). */
  start(closed: () => void = () => undefined): void {
    this.ch.onMessage((m) => this.#take(m));
    this.ch.onClose((error) => {
      this.#ended = true;
      closed();
      if (this.#timer) clearTimeout(this.#timer);
      if (this.#retry) clearTimeout(this.#retry);
      this.hub.unregister(this);
      if (this.#authed)
        this.hub.log.info({ network: this.network, node: this.node, peer: this.peer, code: error?.code, err: error?.message }, 'sync stream closed');
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

  /**
   * Sends what the node is missing, if anything, and says what it sent (the fan-out's tally: one
   * info line per fan-out; each agent's delta is a debug line, a snapshot an info line).
   */
  pump(): Sent | undefined {
    if (!this.#authed || this.#ended) return;
    const { controller, metrics } = this.hub;
    // A node removed while its stream was open: the stream ends, the change that removed it stands.
    // Its network's change is being committed (a store across the network): nothing of it goes before the answer.
    if (controller.settling(this.network)) return void this.hub.holdPump(this);
    if (!controller.member(this.network, this.node))
      return void this.#refuse(new MeshpError('MESHP_NODE_REVOKED', `node ${this.node} was removed from ${this.network}`));
    const self = controller.expiryOf(this.network, this.node);
    if (self?.expired) return void this.#refuse(expiredError(this.network, this.node, self.expiresAt));
    // An admin's renewal (or its agent's) moved the expiry: the agent is told, so it renews in time.
    this.#sayExpiry(self);
    const delta = controller.deltaFor(this.network, this.node);
    if (!delta) return void this.#held();
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
      this.hub.log.error(
        {
          network: this.network,
          node: this.node,
          fromVersion: delta.fromVersion,
          toVersion: delta.toVersion,
          code: isMeshpError(e) ? e.code : undefined,
          err: oneLine(e),
        },
        'delta not sent: over the message limit',
      );
      return;
    }
    // Their size on the wire is counted by the transport as it encodes them (metrics.bytesSent).
    for (const part of parts) this.ch.send({ delta: part });
    this.hub.log[snapshot ? 'info' : 'debug'](
      {
        network: this.network,
        node: this.node,
        fromVersion: delta.fromVersion,
        toVersion: delta.toVersion,
        snapshot,
        upserts: delta.upsertPeers.length,
        removals: delta.removePeers.length,
      },
      snapshot ? 'snapshot sent' : 'delta sent',
    );
    return { network: this.network, toVersion: delta.toVersion, snapshot };
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
      this.hub.log.warn(
        { network: this.network, node: this.node, peer: this.peer, code: 'MESHP_DIVERGED', err: diverged },
        'membership diverged: no more snapshots until an ack or a hello matches',
      );
      // The agent is told (it keeps its last good view; the stream stays open): its next view change brings one snapshot again.
      this.ch.send({ error: { code: 'MESHP_DIVERGED', message: diverged } });
    }
    if (!diverged) this.#divergedSaid = false;
  }

  #take(m: AgentMessage): void {
    try {
      this.#receive(m);
    } catch (e) {
      // The store refused a write this message asked for: the agent is told, its stream stays open (issue 24).
      if (this.#authed && isStoreFault(e)) this.#storeRefused(e, 'message not taken');
      else this.#refuse(e);
    }
  }

  #receive(m: AgentMessage): void {
    if (this.#ended) return;
    const { controller } = this.hub;
    // A hello being read from a store across the network: what came after it waits its turn.
    if (this.#waiting) return void this.#waiting.push(m);
    if (!this.#authed) {
      if (!('hello' in m)) throw new MeshpError('MESHP_AUTH_FAILED', 'the first message on a stream must be a signed hello');
      this.#hello(m.hello);
      return;
    }
    if ('hello' in m) throw malformed('hello twice on one stream');
    if (!controller.member(this.network, this.node)) throw new MeshpError('MESHP_NODE_REVOKED', `node ${this.node} was removed from ${this.network}`);
    const expiry = controller.expiryOf(this.network, this.node);
    if (expiry?.expired) throw expiredError(this.network, this.node, expiry.expiresAt);
    this.hub.seen(this.network, this.node);
    if ('renew' in m) this.#renew(expiry);
    else if ('ack' in m) this.#ack(m.ack);
    else if ('resync' in m) this.#resync(m.resync);
    else if ('report' in m) this.#report(m.report);
  }

  #ack(ack: AckMessage): void {
    const { controller } = this.hub;
    const r = controller.ack(this.network, this.node, ack.appliedVersion, ack.stateHash);
    if (r.accepted) this.hub.acked(this.network, this.node, ack.appliedVersion, ack.stateHash);
    if (!r.accepted)
      this.hub.log.warn(
        { network: this.network, node: this.node, appliedVersion: ack.appliedVersion },
        'ack hash differs from the view computed for that version: snapshot',
      );
    // A snapshot now, one held back by the backoff, or none (diverged: #held says so).
    if (r.snapshotPending || !r.accepted) this.pump();
  }

  /**
   * The agent asks its credential renewed (ADR 0041): once its renewal time has come, the term starts
   * again from now for the network's node lifetime (one change, no token); asked before, the expiry
   * stands. Either way the agent is told its expiry.
   */
  #renew(expiry: { expiresAt: string; renewAt: string } | null): void {
    const { controller } = this.hub;
    if (!expiry) return;
    if (Date.parse(expiry.renewAt) > Date.now()) {
      // Asked early (its clock ahead): the expiry stands, and is said again.
      this.#saidExpiry = '';
      return void this.#sayExpiry();
    }
    this.#changeMay(
      'renewal not stored',
      () => controller.renewNode(this.network, this.node),
      () => {
        this.hub.log.info(
          { network: this.network, node: this.node, expiresAt: controller.member(this.network, this.node)?.expiresAt },
          'credential renewed by its agent',
        );
        this.hub.expiryMoved(controller.member(this.network, this.node)?.expiresAt ?? undefined);
        this.hub.poke(this.network);
        this.#sayExpiry();
      },
    );
  }

  /** The agent takes expiry and rekey messages (its hello said so); an older one is sent neither. */
  #expiryAware = false;
  /** The expiry last told to the agent: told again only when it moved. */
  #saidExpiry = '';

  /** Tells the agent when its credential expires and when to renew it, when that moved (nothing for a node that never expires). */
  #sayExpiry(known?: ReturnType<Controller['expiryOf']>): void {
    const e = known !== undefined ? known : this.hub.controller.expiryOf(this.network, this.node);
    if (!e || this.#ended || !this.#expiryAware || e.expiresAt === this.#saidExpiry) return;
    this.#saidExpiry = e.expiresAt;
    this.ch.send({ expiry: { expiresAt: e.expiresAt, renewAt: e.renewAt } });
  }

  /** Asks the agent for a new tunnel key (meshp node rekey): it reports the public key, a normal key change then. */
  rekey(id: string): boolean {
    if (!this.#authed || this.#ended || !this.#expiryAware) return false;
    this.hub.log.info({ network: this.network, node: this.node, id }, 'tunnel rekey asked');
    this.ch.send({ rekey: { id } });
    return true;
  }

  #resync(resync: ResyncMessage): void {
    const { controller } = this.hub;
    this.hub.resync(this.peer);
    this.hub.log.warn({ network: this.network, node: this.node, reason: resync.reason, detail: resync.detail }, 'agent asked for a snapshot');
    controller.resync(this.network, this.node);
    this.pump();
  }

  /** The agent's report: its state for status and metrics, the file's copy for doctor, a tunnel key it changed. */
  #report(report: ReportMessage): void {
    const { controller } = this.hub;
    const count = (s: string) => report.resources.filter((r) => r.state === s).length;
    const r = report;
    const refusedCodes: Record<string, number> = {};
    for (const x of r.resources) if (x.state === 'refused') refusedCodes[codeOf(x.reason)] = (refusedCodes[codeOf(x.reason)] ?? 0) + 1;
    const handshakes = reportedHandshakes(r, controller.reportedHandshakes(this.network, this.node), new Date().toISOString());
    const reported: ReportedState = {
      version: r.appliedVersion,
      mode: r.mode,
      at: r.at,
      refusedResources: count('refused'),
      refusedCodes,
      ...(handshakes ? { handshakes } : {}),
      ...(r.lifecycle
        ? {
            lifecycle: {
              state: r.lifecycle.state,
              previewId: r.lifecycle.previewId,
              code: r.lifecycle.code ?? '',
              message: r.lifecycle.message ?? '',
              at: r.lifecycle.at,
            },
          }
        : {}),
      ...(r.reconcile ? { reconcile: { ...r.reconcile } } : {}),
      tunnel: { key: !!r.tunnelKey, interface: r.tunnelInterface ?? '', error: r.tunnelError ?? '' },
    };
    controller.report(this.network, this.node, { firewallKind: r.firewallKind || 'none', held: count('held'), changed: count('changed'), reported });
    this.#storeReport(report);
    this.#mappings(report);
    this.#relayed(report);
    // A tunnel key other than the stored one: a key change, sent on to every peer that sees this node.
    if (r.tunnelKey && r.tunnelKey !== controller.member(this.network, this.node)?.tunnelKey) {
      const key = r.tunnelKey;
      const refused = (e: unknown) =>
        // Refused (another node's key, not a key, the store): the stored key stays, the stream goes on.
        this.hub.log.warn({ network: this.network, node: this.node, code: isMeshpError(e) ? e.code : undefined, err: oneLine(e) }, 'tunnel key change refused');
      const changed = () => {
        this.hub.log.info({ network: this.network, node: this.node }, 'tunnel key changed');
        this.hub.poke(this.network);
      };
      if (controller.asyncStore) void controller.change(() => controller.setTunnelKey(this.network, this.node, key)).then(changed, refused);
      else {
        try {
          controller.setTunnelKey(this.network, this.node, key);
          changed();
        } catch (e) {
          refused(e);
        }
      }
    }
  }

  /**
   * A control-node's report: the endpoint its device sends each peer to is that peer's NAT mapping
   * (issue 27, wgsd-style), stored as a candidate endpoint its peers are given. From a control-node
   * only: a member on the peer's own LAN would see its private address and the two would flap.
   */
  #mappings(report: ReportMessage): void {
    const { controller } = this.hub;
    const self = controller.member(this.network, this.node);
    if (!self || !isControlNode(self.tags) || !report.peerHandshakes) return;
    for (const m of mappingsOf(report.peerHandshakes, report.at, (id) => controller.member(this.network, id))) {
      this.#changeMay(
        'mapped endpoint not stored',
        () => controller.updateMember(this.network, m.peer, { mappedEndpoint: m.endpoint }),
        () => this.hub.poke(this.network),
      );
    }
  }

  /**
   * The node's relayed address on its relay allocation (issue 27): stored on the member, so every
   * peer that sees it is sent it as its last candidate (`relay:IP:PORT`). A tunnel's report without
   * one withdraws it (the allocation is gone); a report with no tunnel leaves it alone.
   */
  #relayed(report: ReportMessage): void {
    const { controller } = this.hub;
    const self = controller.member(this.network, this.node);
    if (!self || !report.peerHandshakes) return;
    const now = report.relayedAddress ?? '';
    if ((self.relayedEndpoint ?? '') === now) return;
    this.#changeMay(
      'relayed address not stored',
      () => controller.updateMember(this.network, this.node, { relayedEndpoint: now || undefined }),
      () => this.hub.poke(this.network),
    );
  }

  /** The report's copy for doctor: kept in memory either way (the sync record); one the store refuses waits for the next report. */
  #storeReport(report: ReportMessage): void {
    const { auth } = this.hub;
    const refused = (e: unknown) => {
      if (!isMeshpError(e) || !isStoreFault(e)) throw e;
      if (!this.#ended) this.#storeRefused(e, 'report not stored');
    };
    // A store across the network: written without the event loop waiting on it.
    if (auth.putReportAsync)
      return void auth.putReportAsync(this.network, this.node, report).catch((e: unknown) => {
        if (isStoreFault(e)) refused(e);
        else this.hub.log.warn({ network: this.network, node: this.node, err: oneLine(e) }, 'report not stored');
      });
    try {
      auth.putReport(this.network, this.node, report);
    } catch (e) {
      refused(e);
    }
  }

  /**
   * The hello: whose the credential is, read at once from the controller's own disk; from a store
   * across the network without the event loop waiting (issue 24), the messages after it kept in
   * order meanwhile and taken once it is answered. A store that does not answer refuses the stream
   * with its code (MESHP_STORE_UNAVAILABLE); the agent opens another, as after any refusal.
   */
  #hello(h: HelloMessage): void {
    const { auth, controller } = this.hub;
    this.hub.hello(this.peer);
    if (!auth.helloFactsAsync) {
      const owner = this.#owner(h, helloFacts(auth, h));
      // Enrolled through another controller on the same database a moment ago: caught up first.
      if (!controller.member(owner.network, owner.node)) controller.refresh();
      return this.#admit(h, owner);
    }
    // The hello came: the store's own timeout bounds the read, not the hello's.
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
    const waiting: AgentMessage[] = [];
    this.#waiting = waiting;
    const read = async () => {
      const owner = this.#owner(h, await auth.helloFactsAsync!(h.credential, h.node));
      if (!controller.member(owner.network, owner.node)) await controller.refreshAsync();
      // Its stream may have been on another replica: the record that one wrote, read here too.
      return { owner, stored: await controller.storedSyncAsync(owner.network, owner.node) };
    };
    read()
      .then(({ owner, stored }) => {
        if (this.#ended) return;
        this.#admit(h, owner, stored);
        this.#waiting = null;
        for (const m of waiting) this.#take(m);
      })
      .catch((e: unknown) => {
        this.#waiting = null;
        this.#refuse(e);
      });
  }

  /** The messages that came after a hello being read. */
  #waiting: AgentMessage[] | null = null;

  /** Whose the credential is, as the hello may use it; refused otherwise. */
  #owner(h: HelloMessage, facts: HelloFacts): { network: string; node: string } {
    const owner = facts.owner;
    if (!owner) {
      // A removed node's agent, back after the removal: its hello is signed by a key revoked under
      // its name, so the answer is definite (the agent then leaves); any other unknown credential is not.
      const revoked = facts.revokedKeys.find((r) => signedBy(r.nodeKey, challengePayload(h.node, this.#nonce), h.signature));
      if (revoked)
        throw new MeshpError('MESHP_NODE_REVOKED', `node ${h.node} was removed from ${revoked.network} (${revoked.at}): its credential and key are revoked`);
      throw new MeshpError('MESHP_AUTH_FAILED', 'the node credential is not known (never issued, or revoked by node remove)');
    }
    // An agent that was offline while it was renamed still says its old name; the declaration tells it the new one.
    if (owner.node !== h.node && facts.renamedTo !== owner.node) {
      throw new MeshpError('MESHP_FORBIDDEN', `the credential of ${owner.node} asked for the state of ${h.node}`);
    }
    return owner;
  }

  /** The hello's node, known by its credential: its signature checked, its stream served. */
  #admit(h: HelloMessage, owner: { network: string; node: string }, stored?: StoredSync): void {
    const { auth, controller, log } = this.hub;
    const member = controller.member(owner.network, owner.node);
    if (!member) throw new MeshpError('MESHP_AUTH_FAILED', `node ${owner.node} is no longer in ${owner.network}`);
    // A deliberate break (proto/README.md): v1-r1's hello carries no signature, and a credential alone no longer syncs.
    if (!h.signature || h.signature.length === 0)
      throw new MeshpError(
        'MESHP_AUTH_FAILED',
        `unsigned hello from ${h.node}: a v1-r1 agent (the v1-r2 controller needs the challenge signed with the node key; upgrade the agent, its key and credential stay valid)`,
      );
    const good = signedBy(member.nodeKey, challengePayload(h.node, this.#nonce), h.signature);
    if (!good) throw new MeshpError('MESHP_AUTH_FAILED', `the hello of ${h.node} is not signed by its enrolled key`);
    // Its credential expired (ADR 0041): refused, coded; it stays a member, and an admin's renewal lets it back.
    const expiry = controller.expiryOf(owner.network, owner.node);
    if (expiry?.expired) {
      this.hub.expiryMoved();
      throw expiredError(owner.network, owner.node, expiry.expiresAt);
    }
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
    // Neither is needed to serve the stream: one the store refuses is tried again at the next hello.
    if (observed && observed !== member.observedEndpoint) {
      this.#changeMay(
        'observed endpoint not stored',
        () => controller.updateMember(this.network, this.node, { observedEndpoint: observed }),
        () => this.hub.poke(this.network),
      );
    }
    // The exit node its agent asks for (--exit-node, ADR 0039), kept as the node's choice when it changed.
    const exitNode = h.exitNode ?? '';
    if (exitNode !== controller.exitAskedOf(this.network, this.node)) {
      this.#changeMay(
        'exit node asked not stored',
        () => controller.exitAsked(this.network, this.node, exitNode),
        () => this.hub.poke(this.network),
      );
    }
    // The node holds its credential: the token it enrolled with is spent for good.
    const at = new Date().toISOString();
    if (auth.confirmAsync) void auth.confirmAsync(this.network, this.node, at).catch((e: unknown) => this.#passed(e, 'token not confirmed'));
    else this.#storeMay('token not confirmed', () => auth.confirm(this.network, this.node, at));
    const r = controller.hello(this.network, this.node, h.appliedVersion, h.stateHash, h.versionSignature, h.revision, stored);
    this.#expiryAware = h.expiryAware === true;
    this.#sayExpiry();
    log.info({ network: this.network, node: this.node, peer: this.peer, appliedVersion: h.appliedVersion, resume: !r.snapshotPending }, 'sync stream opened');
    if (r.movedAhead) {
      log.warn(
        { network: this.network, node: this.node, appliedVersion: h.appliedVersion, from: r.movedAhead.from, to: r.movedAhead.to },
        "an agent had applied a version past this controller's: its state is an older copy (restored from a backup?); the network's version moved past it, every node gets a snapshot",
      );
      this.hub.poke(this.network);
    } else this.pump();
  }

  /**
   * A change the stream asks for (`then` after it): at once, or, with a store across the network,
   * as one change committed without the event loop waiting (controller.change); a store refusal is
   * said and passed over either way.
   */
  #changeMay(what: string, fn: () => unknown, then: () => void): void {
    const { controller } = this.hub;
    if (!controller.asyncStore) return this.#storeMay(what, () => (fn(), then()));
    void controller.change(fn).then(then, (e: unknown) => this.#passed(e, what));
  }

  /** A write the stream asked for without waiting, refused: a store refusal said to the agent, any other logged. */
  #passed(e: unknown, what: string): void {
    if (!this.#ended && isMeshpError(e) && isStoreFault(e)) this.#storeRefused(e, what);
    else this.hub.log.warn({ network: this.network, node: this.node, code: isMeshpError(e) ? e.code : undefined, err: oneLine(e) }, `${what}: refused`);
  }

  /** `fn`, whose store refusal is said and passed over (another error goes on up). */
  #storeMay(what: string, fn: () => void): void {
    try {
      fn();
    } catch (e) {
      if (!isStoreFault(e)) throw e;
      this.#storeRefused(e, what);
    }
  }

  /** A write the store refused for this stream: counted, logged, and the agent told; the stream goes on. */
  #storeRefused(e: MeshpError, what: string): void {
    this.hub.metrics.refused(e.code);
    this.hub.log.warn({ code: e.code, peer: this.peer, network: this.network, node: this.node, err: oneLine(e) }, `store refused: ${what}`);
    this.ch.send({ error: { code: e.code, message: e.message } });
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

/** The refusal of an expired node's hello and stream (MESHP_NODE_EXPIRED): not a removal, the agent keeps trying. */
function expiredError(network: string, node: string, at: string): MeshpError {
  return new MeshpError('MESHP_NODE_EXPIRED', `the credential of ${node} in ${network} expired at ${at}: an admin renews it (meshp node renew ${node})`);
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

/** What a hello needs, read at once (a store on the controller's own disk). */
function helloFacts(auth: AuthBook, h: HelloMessage): HelloFacts {
  const owner = auth.nodeOf(h.credential);
  return {
    owner,
    renamedTo: owner && owner.node !== h.node ? auth.renamedTo(owner.network, h.node) : null,
    revokedKeys: owner ? [] : auth.revokedKeysOf(h.node),
  };
}

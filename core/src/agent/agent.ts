/**
 * The agent loop, without I/O of its own: the transport, the store, the firewall and the files are
 * the host's plugins. hello → deltas → apply the view → reconcile the declaration → ack → report.
 * It reconciles on every delta, on a timer, and when the firewall driver sees a reload.
 */
import type { FirewallDriver, Listener, PublishedPort } from '../contract/providers.js';
import type { HostReport } from '../contract/plan.js';
import { pluginPlanOfNode, reachOf } from '../lifecycle/flip.js';
import { previewDoors } from '../lifecycle/preview.js';
import { isMeshpError, oneLine } from '../errors.js';
import { usage } from '../conditions.js';
import type { Host } from '../host/host.js';
import { DeltaApplier, type AppliedRecord } from '../delta/agent/delta-applier.js';
import { WIRE_MODE, type StateDelta, type WireDeclaration } from '../contract/wire.js';
import { declarationFromWire } from '../delta/declaration.js';
import { Backoff } from './backoff.js';
import { loadView, persistView } from './view-store.js';
import { reconcileLifecycle, type LifecycleOutcome } from './lifecycle.js';
import { LEFT_KEY, leaveMesh, leftRefusal, type LeaveOutcome, type LeftRecord } from './leave.js';
import {
  PROTOCOL_REVISION,
  challengePayload,
  type AgentMessage,
  type ControlLink,
  type ControllerMessage,
  type CredentialExpiry,
  type EnrolResult,
  type LifecycleReport,
  type ReconcileOutcome,
  type ReportMessage,
  type SyncChannel,
  type TransportError,
} from '../contract/transport.js';

export const ENROLMENT_KEY = 'agent.enrolment';
// VIEW_KEY: view-store.ts
/** The last deltas applied, kept in the host store for `meshp doctor --local`. */
export const RECENT_KEY = 'agent.recent';
/** The controller's signature of the version applied: the proof a restored controller asks for. */
export const VERSION_SIGNATURE_KEY = 'agent.version-signature';
/** Enrol calls made before giving up on an unreachable controller (the process is restarted by its supervisor after). */
const ENROL_ATTEMPTS = 5;
/** The longest delay a timer holds (2^31 - 1 ms, ~24.8 days). */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * A newer handshake alone sends a report only once the newest one sent is older than this: WireGuard
 * rekeys every peer every 2 minutes, so a report per handshake would be one per peer per 2 minutes
 * (a control-node with 1,000 peers: 8 a second). The controller then knows the newest handshake at
 * most this (plus one reconcile interval) late, well inside its limit (HANDSHAKE_STALE_SECONDS).
 */
export const HANDSHAKE_REPORT_AFTER_S = 30;

/** pino's call shape: fields first, then the message. */
export interface AgentLog {
  info(fields: Record<string, unknown>, msg: string): void;
  warn(fields: Record<string, unknown>, msg: string): void;
  error(fields: Record<string, unknown>, msg: string): void;
}

const SILENT: AgentLog = { info() {}, warn() {}, error() {} };

/** The node left its network while the agent ran: why, and what the leave took away. */
export interface AgentLeft {
  why: string;
  network: string;
  node: string;
  outcome: LeaveOutcome;
}

export interface AgentOptions {
  /** The name the node asks for at enrolment. */
  node: string;
  /** Needed only until the node is enrolled. */
  token?: string;
  /** The node's public key, as the controller stores it. */
  nodeKey: string;
  sign(payload: Uint8Array): Uint8Array | Promise<Uint8Array>;
  endpoints?: string[];
  /** Reconcile at least this often (ms). Default 10 s. */
  intervalMs?: number;
  backoff?: { initialMs: number; maxMs: number; random?: () => number };
  log?: AgentLog;
  /**
   * Awaited before each reconcile: what the plugins that follow the view must finish first (the tunnel
   * raised, the resolver bound), so the machine a converge preview sees is the one its flip sees.
   */
  beforeReconcile?: () => Promise<void>;
  /**
   * issue 28: makes a new tunnel key and puts it on the device (meshp node rekey asked it); the
   * report sent after it carries the new public key. Absent: the agent runs no tunnel, the ask is logged.
   */
  rekey?: () => Promise<void>;
}

export class Agent {
  readonly applier = new DeltaApplier();
  readonly #host: Host;
  readonly #link: ControlLink;
  readonly #o: AgentOptions;
  readonly #log: AgentLog;
  readonly #backoff: Backoff;
  /** The longest reconnect delay: a stream open longer than this was settled, not a fight or a crash loop. */
  readonly #settledMs: number;
  #enrolment: EnrolResult | null = null;
  #channel: SyncChannel<ControllerMessage, AgentMessage> | null = null;
  #stopped = false;
  #wake: (() => void) | null = null;
  #timer: ReturnType<typeof setInterval> | null = null;
  #watch: { close(): void } | null = null;
  #reconciling: Promise<void> | null = null;
  #again = false;
  #lastReport: ReportMessage | null = null;
  /** What the last report sent said, but its time: a report goes up when this changes. */
  #sentKey = '';
  /** The newest tunnel handshake the last report sent carried (unix s, 0 none). */
  #sentHandshake = 0;
  #loop: Promise<void> | null = null;
  /** The store holds the view per peer (view-store.ts): a delta writes only what it changed. */
  #viewPerPeer = false;
  #leaving: Promise<void> | null = null;
  #onLeft: (l: AgentLeft) => void = () => {};
  /**
   * Resolves once the node has left while the agent ran: the controller answered MESHP_NODE_REVOKED
   * (only that definite answer: an unreachable controller or any other refusal keeps the agent
   * retrying), or `meshp agent leave` marked the state folder. The agent has stopped by then.
   */
  readonly left: Promise<AgentLeft> = new Promise((resolve) => {
    this.#onLeft = resolve;
  });

  constructor(host: Host, link: ControlLink, options: AgentOptions) {
    this.#host = host;
    this.#link = link;
    this.#o = options;
    this.#log = options.log ?? SILENT;
    const backoff = options.backoff ?? { initialMs: 250, maxMs: 15_000 };
    this.#backoff = new Backoff(backoff);
    this.#settledMs = backoff.maxMs;
  }

  get enrolment(): EnrolResult | null {
    return this.#enrolment;
  }

  /** The last report made (sent or not), for the agent's own /metrics. */
  get lastReport(): ReportMessage | null {
    return this.#lastReport;
  }

  /** Whether a Sync stream is open now. */
  get connected(): boolean {
    return this.#channel !== null;
  }

  /** Restores the view, enrols when not yet enrolled, and starts the loop. Throws when enrolment is refused. */
  async start(): Promise<void> {
    const store = await this.#host.state();
    const left = await store.getValue<LeftRecord>(LEFT_KEY);
    if (left) throw leftRefusal(left);
    const saved = await loadView(store);
    if (saved.snapshot) this.applier.restore(saved.snapshot);
    this.#viewPerPeer = saved.perPeer;
    this.applier.recent.push(...((await store.getValue<AppliedRecord[]>(RECENT_KEY)) ?? []));
    this.#enrolment = await store.getValue<EnrolResult>(ENROLMENT_KEY);
    if (!this.#enrolment) {
      if (!this.#o.token) throw usage('this node is not enrolled yet: give it a token');
      this.#enrolment = await this.#enrol(this.#o.token);
      await store.setValue(ENROLMENT_KEY, this.#enrolment);
      this.#log.info({ network: this.#enrolment.network, node: this.#enrolment.node, mode: this.#enrolment.mode }, 'enrolled');
    }
    this.#log.info({ node: this.#enrolment.node, appliedVersion: this.applier.appliedVersion }, 'starting');
    await this.#watchFirewall();
    this.#timer = setInterval(() => this.requestReconcile('timer'), this.#o.intervalMs ?? 10_000);
    this.#loop = this.#connectLoop();
  }

  /**
   * Enrols; an answer that did not arrive (unreachable, a deadline) is asked again with the same
   * token and key: the controller completes the same enrolment with a new credential (it spends the
   * token only once the node has one). Refusals are not retried.
   */
  async #enrol(token: string): Promise<EnrolResult> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.#link.enrol({ token, nodeKey: this.#o.nodeKey, node: this.#o.node, endpoints: this.#o.endpoints ?? [] });
      } catch (e) {
        if (!isMeshpError(e, 'MESHP_UNAVAILABLE') || attempt >= ENROL_ATTEMPTS || this.#stopped) throw e;
        const retryMs = this.#backoff.next();
        this.#log.warn({ code: e.code, err: e.message, attempt, retryMs }, 'enrolment answer not received; asking again with the same token and key');
        await new Promise((r) => setTimeout(r, retryMs));
      }
    }
  }

  /** Stops cleanly: the stream closed, the timer and the watch gone, a running reconcile finished. */
  async stop(): Promise<void> {
    if (this.#leaving) return this.#leaving;
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    if (this.#renewTimer) clearTimeout(this.#renewTimer);
    this.#watch?.close();
    this.#channel?.close();
    this.#wake?.();
    await this.#loop;
    await this.#reconciling;
    this.#link.close();
    this.#log.info({ appliedVersion: this.applier.appliedVersion }, 'stopped');
  }

  /** Reconciles now, or once more after the one running. */
  requestReconcile(reason: string): void {
    if (this.#stopped) return;
    if (this.#reconciling) {
      // A timer tick during a reconcile is not news: on a slow machine (a reconcile longer than the
      // interval) it would keep the loop running forever, and a delta waiting for it never acked.
      if (reason !== 'timer') this.#again = true;
      return;
    }
    this.#reconciling = this.#reconcileLoop(reason).finally(() => {
      this.#reconciling = null;
    });
  }

  async #watchFirewall(): Promise<void> {
    let driver: FirewallDriver | null = null;
    try {
      driver = await this.#host.firewall();
    } catch (e) {
      this.#log.warn({ err: oneLine(e) }, 'firewall probe refused');
    }
    if (driver?.watch) this.#watch = driver.watch(() => this.requestReconcile('firewall'));
  }

  async #connectLoop(): Promise<void> {
    while (!this.#stopped) {
      const { error, openMs } = await this.#session();
      if (this.#stopped) break;
      // A controller that was there for a while and went away (a replica killed): the next round starts
      // soon, still jittered, even when no delta reset the backoff since the last failures. A stream
      // refused, never opened, or lost soon after it opened (a crash loop, a twin with the same
      // credential replacing it) backs off further each time.
      if (error?.code === 'MESHP_UNAVAILABLE' && openMs >= this.#settledMs) this.#backoff.reset();
      const delay = this.#backoff.next();
      this.#log.warn({ code: error?.code, err: error?.message, retryMs: delay }, 'stream ended; reconnecting');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, delay);
        this.#wake = () => {
          clearTimeout(t);
          resolve();
        };
      });
      this.#wake = null;
    }
  }

  /** One Sync stream, until it ends (with how long it was open: 0 when the controller never spoke). Messages are handled one at a time, in order. */
  #session(): Promise<{ error: TransportError | undefined; openMs: number }> {
    return new Promise((resolve) => {
      const ch = this.#link.sync();
      this.#channel = ch;
      let chain = Promise.resolve();
      let openedAt: number | null = null;
      ch.onMessage((m) => {
        openedAt ??= Date.now();
        chain = chain.then(() => this.#handle(ch, m)).catch((e) => this.#log.error({ err: oneLine(e) }, 'message handling failed'));
      });
      ch.onClose((error) => {
        if (this.#channel === ch) this.#channel = null;
        if (error?.code === 'MESHP_NODE_REVOKED') this.#leave(`removed by the controller: ${error.message}`);
        const openMs = openedAt === null ? 0 : Date.now() - openedAt;
        void chain.then(() => resolve({ error, openMs }));
      });
    });
  }

  async #handle(ch: SyncChannel<ControllerMessage, AgentMessage>, m: ControllerMessage): Promise<void> {
    const e = this.#enrolment!;
    if ('challenge' in m) {
      const { appliedVersion, stateHash } = this.applier.hello();
      const signature = await this.#o.sign(challengePayload(e.node, m.challenge));
      const kept = await (await this.#host.state()).getValue<{ version: number; signature: string }>(VERSION_SIGNATURE_KEY);
      const versionSignature = kept && kept.version === appliedVersion ? Buffer.from(kept.signature, 'base64') : undefined;
      ch.send({
        hello: {
          node: e.node,
          credential: e.credential,
          appliedVersion,
          stateHash,
          revision: PROTOCOL_REVISION,
          signature,
          // It renews its credential and makes a new tunnel key when told (ADR 0041).
          expiryAware: true,
          ...(versionSignature ? { versionSignature } : {}),
        },
      });
      if (this.#lastReport) ch.send({ report: this.#lastReport });
      return;
    }
    if ('expiry' in m) return this.#expiryTold(m.expiry);
    if ('rekey' in m) return this.#rekey(ch, m.rekey.id);
    if ('error' in m) {
      this.#log.warn({ code: m.error.code, err: m.error.message }, 'controller refused');
      if (m.error.code === 'MESHP_NODE_REVOKED') this.#leave(`removed by the controller: ${m.error.message}`);
      return;
    }
    await this.#onDelta(ch, m.delta);
  }

  /** The renewal's timer, set when the controller says when the credential expires (ADR 0041). */
  #renewTimer: ReturnType<typeof setTimeout> | null = null;

  /**
   * The controller said when the credential expires and when to renew it (a third of its term
   * before): at that time the agent asks, on its stream, without a token. Asked again at each hello
   * while it is due (a renewal whose answer was lost, a stream that ended first).
   */
  #expiryTold(e: CredentialExpiry): void {
    if (this.#renewTimer) clearTimeout(this.#renewTimer);
    this.#renewTimer = null;
    if (this.#stopped) return;
    const wait = Date.parse(e.renewAt) - Date.now();
    this.#log.info({ expiresAt: e.expiresAt, renewAt: e.renewAt }, 'credential expiry');
    const ask = () => {
      this.#renewTimer = null;
      if (!this.#channel || this.#stopped) return;
      this.#log.info({ expiresAt: e.expiresAt }, 'renewing the credential');
      this.#channel.send({ renew: {} });
    };
    // Past renewAt: asked now (the controller answers with the new expiry, which sets the next timer).
    if (wait <= 0) return ask();
    // Timers hold 32-bit delays: a renewal further than ~24 days off is looked at again then.
    this.#renewTimer = setTimeout(() => (wait > MAX_TIMER_MS ? this.#expiryTold(e) : ask()), Math.min(wait, MAX_TIMER_MS));
    this.#renewTimer.unref?.();
  }

  /** The admin asked a new tunnel key (meshp node rekey): made, put on the device, reported at once. */
  async #rekey(ch: SyncChannel<ControllerMessage, AgentMessage>, id: string): Promise<void> {
    if (!this.#o.rekey) return void this.#log.warn({ id }, 'tunnel rekey asked, but this agent runs no tunnel');
    try {
      await this.#o.rekey();
    } catch (e) {
      return void this.#log.error({ id, err: oneLine(e) }, 'tunnel rekey refused: the key stays as it was');
    }
    this.#log.info({ id }, 'tunnel key made anew: reported to the controller');
    // The report carries the tunnel's key as it is now (the link adds it): the controller takes it as a key change.
    if (this.#lastReport && this.#channel === ch) ch.send({ report: { ...this.#lastReport, at: new Date().toISOString() } });
  }

  async #onDelta(ch: SyncChannel<ControllerMessage, AgentMessage>, delta: StateDelta): Promise<void> {
    let result;
    try {
      result = this.applier.receive(delta);
    } catch (err) {
      const resync = this.applier.resyncRequest(err);
      this.#log.warn(
        { code: isMeshpError(err) ? err.code : undefined, err: oneLine(err), fromVersion: delta.fromVersion, toVersion: delta.toVersion },
        'delta refused; asking for a snapshot',
      );
      ch.send({ resync });
      return;
    }
    if (result.status !== 'applied') return;
    this.#backoff.reset();
    const store = await this.#host.state();
    // Only what the delta changed (a snapshot, or a view not yet kept per peer: all of it), in one write.
    const values: Record<string, unknown> = { [RECENT_KEY]: this.applier.recent };
    if (delta.versionSignature?.length)
      values[VERSION_SIGNATURE_KEY] = { version: delta.toVersion, signature: Buffer.from(delta.versionSignature).toString('base64') };
    const change = delta.fromVersion === 0 || !this.#viewPerPeer ? null : result.change;
    // Not per peer until this save is known to be kept: a refused save (a full disk) leaves the store
    // behind memory, and the next save then writes the whole view, not only the next delta's peers.
    this.#viewPerPeer = false;
    await persistView(store, this.applier.view, change, values);
    this.#viewPerPeer = store.saveView !== undefined;
    // The controller's declaration names the node: after `meshp node rename`, the agent says its new name.
    const named = this.applier.view.components.declaration?.node;
    if (named && this.#enrolment && named !== this.#enrolment.node) {
      this.#log.info({ from: this.#enrolment.node, to: named }, 'renamed');
      this.#enrolment = { ...this.#enrolment, node: named };
      await store.setValue(ENROLMENT_KEY, this.#enrolment);
    }
    this.#log.info(
      {
        fromVersion: delta.fromVersion,
        toVersion: delta.toVersion,
        snapshot: delta.fromVersion === 0,
        upserted: result.change.upserted.length,
        removed: result.change.removed.length,
        unscoped: result.change.unscoped.length,
        components: result.change.components,
      },
      'applied',
    );
    this.#host.hooks.viewChanged.call(result.change);
    this.requestReconcile('delta');
    await this.#reconciling;
    // The ack follows the reconcile of this version (the controller takes it as reported at it); a
    // report went before it only if the host's facts changed (#publish): one message per delta, not three.
    if (this.#channel === ch) ch.send({ ack: result.ack });
  }

  async #reconcileLoop(reason: string): Promise<void> {
    do {
      this.#again = false;
      await this.#reconcileOnce(reason);
      reason = 'again';
    } while (this.#again && !this.#stopped);
  }

  /** What the machine offers now, through the facts and runtime plugins; what cannot be read is left out. */
  async #facts(wire: WireDeclaration): Promise<Facts> {
    const out: Facts = { applied: this.applier.recent.map((r) => ({ fromVersion: r.fromVersion, toVersion: r.toVersion, stateHash: r.stateHash })) };
    let listening: Listener[] | null = null;
    let published: PublishedPort[] = [];
    try {
      const facts = await this.#host.facts();
      if (facts) {
        listening = await facts.listening();
        out.listening = listening.map((l) => ({
          protocol: l.protocol,
          address: l.address,
          port: l.port,
          process: l.process ?? '',
          ...(l.pid ? { pid: l.pid } : {}),
          ...(l.established ? { established: l.established } : {}),
        }));
      }
    } catch (e) {
      this.#log.warn({ err: oneLine(e) }, 'listening sockets not readable');
    }
    try {
      const runtime = await this.#host.runtime();
      if (runtime) {
        published = await runtime.publishedPorts();
        out.published = published.map((p) => ({
          container: p.container,
          hostPort: p.hostPort,
          containerPort: p.containerPort,
          protocol: p.protocol,
          hostIp: p.hostIp,
        }));
      }
    } catch {
      // no engine answering: nothing published that the mesh can see
    }
    try {
      const driver = await this.#host.firewall();
      if (driver) {
        const d = await driver.describe();
        Object.assign(out, {
          firewallKind: d.kind,
          firewallActive: d.active,
          firewallTables: [...d.tables],
          ...(d.configFile ? { firewallConfigFile: d.configFile } : {}),
        });
        // The same doors and the same answer the preview on this machine computes, so the controller's preview has the same id.
        const reach = listening ? await reachOf(driver, previewDoors(listening, published)) : null;
        if (reach)
          out.reach = reach.map((r) => ({ port: r.port, protocol: r.protocol, path: r.path, now: r.now, from: [...(r.from ?? [])], mentioned: r.mentioned }));
      }
    } catch (e) {
      this.#log.warn({ err: oneLine(e) }, 'firewall not describable');
    }
    if (out.firewallKind && out.firewallKind !== 'none') Object.assign(out, await this.#pluginPlan(wire));
    return out;
  }

  /** What the plugins add to the converged plan (openings, changes), so the controller's preview counts it as this machine's does. */
  async #pluginPlan(wire: Parameters<typeof declarationFromWire>[0]): Promise<Pick<Facts, 'pluginOpenings' | 'pluginChanges'>> {
    try {
      const { openings, changes } = await pluginPlanOfNode(this.#host, declarationFromWire(wire));
      return { pluginOpenings: openings, ...(changes.length ? { pluginChanges: changes } : {}) };
    } catch (e) {
      this.#log.warn({ err: oneLine(e) }, 'the converged plan could not be previewed: its plugin openings and changes are not reported');
      return {};
    }
  }

  /** Sends the report when the host's facts changed since the last one sent. */
  #publish(report: ReportMessage): void {
    const { at: _at, reconcile, appliedVersion: _v, applied: _a, peerHandshakes, ...rest } = report;
    // The reconcile's time alone is no news (a report per timer tick would be), nor is a new version
    // or the list of deltas applied: the ack says those (the controller counts an ack as reported at its version).
    // The tunnel's peers are news; a newer handshake only as HANDSHAKE_REPORT_AFTER_S says.
    const key = JSON.stringify({
      ...rest,
      reconcile: reconcile ? { ...reconcile, at: '' } : undefined,
      peers: peerHandshakes?.map((p) => [p.peer, p.endpoint ?? '', p.path ?? '']),
    });
    const newest = Math.max(0, ...(peerHandshakes ?? []).map((p) => p.latestHandshake));
    const handshakeNews = newest > this.#sentHandshake && Date.now() / 1000 - this.#sentHandshake > HANDSHAKE_REPORT_AFTER_S;
    if ((key === this.#sentKey && !handshakeNews) || !this.#channel) return;
    this.#channel.send({ report });
    this.#sentKey = key;
    this.#sentHandshake = newest;
  }

  /** A lifecycle step: the last report with the step in it, sent at once. */
  #step(l: LifecycleReport, appliedVersion: number, asked: ReportMessage['mode']): void {
    // Before the host's first report, the machine's mode is the step's word: a refused change of mode left
    // it in the other one (a converged enrolment refused on a machine in use was reported converged).
    const mode = l.state === 'refused' ? (asked === 'converged' ? 'adopted' : 'converged') : asked;
    const base: ReportMessage = this.#lastReport ?? { appliedVersion, mode, firewallKind: '', firewallActive: false, resources: [], at: l.at };
    this.#lastReport = { ...base, appliedVersion, lifecycle: l, at: l.at };
    this.#log.info({ state: l.state, previewId: l.previewId, step: l.steps.at(-1), code: l.code, err: l.message }, 'lifecycle');
    this.#publish(this.#lastReport);
  }

  /**
   * Stops following and takes away what the mesh added (leave.ts), once. Not awaited by its caller
   * (a message handler, the reconcile): it waits for the loop and the reconcile to end first.
   */
  #leave(why: string): void {
    if (this.#leaving) return;
    this.#log.warn({ why }, 'leaving the network: taking away what the mesh added');
    this.#stopped = true;
    if (this.#timer) clearInterval(this.#timer);
    this.#watch?.close();
    this.#channel?.close();
    this.#wake?.();
    const { network, node } = this.#enrolment!;
    this.#leaving = (async () => {
      await this.#loop;
      await this.#reconciling;
      let outcome: LeaveOutcome;
      try {
        outcome = await leaveMesh(this.#host, { preview: false, why, network, node, progress: (step) => this.#log.info({ step }, 'leaving') });
      } catch (e) {
        outcome = { removed: [], kept: [], failed: [isMeshpError(e) ? e.oneLine() : `MESHP_INTERNAL: ${oneLine(e)}`] };
      }
      this.#link.close();
      this.#log.warn({ removed: outcome.removed, kept: outcome.kept, failed: outcome.failed }, 'left the network');
      this.#onLeft({ why, network, node, outcome });
    })();
  }

  async #reconcileOnce(reason: string): Promise<void> {
    await this.#o.beforeReconcile?.().catch(() => undefined);
    const store = await this.#host.state();
    // A store that cannot be read (a damaged page, a full disk) refuses this reconcile like any other
    // refusal, reported to the controller; it does not end the agent.
    let left: LeftRecord | null = null;
    let unread: unknown = null;
    try {
      left = await store.getValue<LeftRecord>(LEFT_KEY);
    } catch (e) {
      unread = e;
    }
    // `meshp agent leave` ran on this state folder while the agent ran: it leaves too (again: whatever
    // it put back in between goes), instead of raising what the operator took away.
    if (left) return this.#leave(left.why);
    const wire = this.applier.view.components.declaration;
    if (!wire) {
      if (unread) this.#log.error({ reason, err: oneLine(unread) }, 'reconcile refused');
      return;
    }
    const appliedVersion = this.applier.appliedVersion;
    try {
      if (unread) throw unread;
      const { result, lifecycle, untake } = await reconcileLifecycle(this.#host, wire, (l) => this.#step(l, appliedVersion, modeOfWire(wire.mode)));
      const { report } = result;
      const refusedResources = report.counts.refused ?? 0;
      const outcome: ReconcileOutcome =
        refusedResources > 0
          ? { result: 'refused', code: 'MESHP_REFUSED', message: `${refusedResources} resource(s) refused`, at: report.at, refusedResources }
          : { result: 'ok', code: '', message: '', at: report.at, refusedResources: 0 };
      this.#lastReport = { ...toReportMessage(report, appliedVersion), ...(await this.#facts(wire)), lifecycle, reconcile: outcome, ...untakeFacts(untake) };
      this.#log.info({ reason, appliedVersion, counts: report.counts, firewall: report.firewall?.kind ?? null, lifecycle: lifecycle.state }, 'reconciled');
      this.#publish(this.#lastReport);
    } catch (e) {
      this.#log.error({ reason, appliedVersion, err: oneLine(e) }, 'reconcile refused');
      // The controller must see the refusal too: the view was applied (and acked), the machine was not changed.
      const at = new Date().toISOString();
      const reconcile: ReconcileOutcome = {
        result: 'refused',
        code: isMeshpError(e) ? e.code : 'MESHP_PLUGIN_FAILED',
        message: isMeshpError(e) ? e.message : oneLine(e),
        at,
        refusedResources: 0,
      };
      const base: ReportMessage = this.#lastReport ?? {
        appliedVersion,
        mode: modeOfWire(wire.mode),
        firewallKind: '',
        firewallActive: false,
        resources: [],
        at,
      };
      this.#lastReport = { ...base, appliedVersion, at, reconcile };
      this.#publish(this.#lastReport);
    }
  }
}

type Facts = Pick<
  ReportMessage,
  'applied' | 'listening' | 'published' | 'firewallTables' | 'firewallConfigFile' | 'reach' | 'pluginOpenings' | 'pluginChanges'
> &
  Partial<Pick<ReportMessage, 'firewallKind' | 'firewallActive'>>;

/** What the report says of untakes (issue 29): only what there is, so an agent with none reports as before. */
const untakeFacts = (u: LifecycleOutcome['untake']): Pick<ReportMessage, 'untakePreviews' | 'untakes' | 'releasePreviews'> => ({
  ...(u?.releases.length ? { releasePreviews: u.releases } : {}),
  ...(u?.previews.length ? { untakePreviews: u.previews } : {}),
  ...(u?.outcomes.length ? { untakes: u.outcomes } : {}),
});

const modeOfWire = (wireMode: number): ReportMessage['mode'] => (wireMode === WIRE_MODE.ADOPTED ? 'adopted' : 'converged');

function toReportMessage(r: HostReport, appliedVersion: number): ReportMessage {
  return {
    appliedVersion,
    mode: r.mode,
    firewallKind: r.firewall?.kind ?? '',
    firewallActive: r.firewall?.active ?? false,
    resources: r.resources.map((x) => ({ key: x.key, kind: x.kind, module: x.module, state: x.state, ...(x.reason ? { reason: x.reason } : {}) })),
    at: r.at,
    ...(r.handshakes ? { peerHandshakes: r.handshakes.map((h) => ({ ...h })) } : {}),
    // A router's forwarding, as a plugin's report hook put it in the facts (issue 26): in the report, so a change of it is news.
    ...(isForwarding(r.facts.forwarding) ? { forwarding: r.facts.forwarding } : {}),
    // The tunnel's relay allocation (issue 27): its relayed address goes to the controller, and from it to the peers.
    ...relayFacts(r.facts.relay),
  };
}

function relayFacts(f: unknown): Pick<ReportMessage, 'relayedAddress' | 'relayId'> {
  if (typeof f !== 'object' || f === null) return {};
  const { relayedAddress, relayId } = f as { relayedAddress?: unknown; relayId?: unknown };
  return typeof relayedAddress === 'string' && relayedAddress && typeof relayId === 'string' ? { relayedAddress, relayId } : {};
}

function isForwarding(f: unknown): f is NonNullable<ReportMessage['forwarding']> {
  return (
    typeof f === 'object' &&
    f !== null &&
    typeof (f as { state?: unknown }).state === 'string' &&
    Object.keys((f as { values?: object }).values ?? {}).length > 0
  );
}

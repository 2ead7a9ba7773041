/**
 * The controller as a hosting plugin: applied to a host that has a transport, `start()` opens the
 * state (one SQLite file in the state folder), makes the certificate and the admin credential on
 * first start, and serves the Control and Admin services, with /metrics beside them.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  MeshpError,
  PLUGIN_API_VERSION,
  isMeshpError,
  type AdminHandler,
  type AuditBook,
  type AdminCredentialBook,
  type ControlHandlers,
  type Plugin,
  type Refused,
  type TransportListener,
  type PluginHost,
  type Unencodable,
} from '@meshp/core';
import { oneLine, usage } from '@meshp/core/util';
import { Controller } from '../controller.js';
import { SqliteControllerStore } from '../sqlite-store.js';
import { adminHandler, DEFAULT_NETWORK } from './admin.js';
import { AuthStore, type AuthBook } from './auth-store.js';
import { SqliteAuditStore } from './audit-store.js';
import { SqliteAdminCredentialStore } from './admin-credential-store.js';
import { couldBeAdmin } from './admin-credentials.js';
import { DEFAULT_AUDIT_RETENTION_SECONDS } from './audit.js';
import { guardAuth } from './auth-guard.js';
import { isStoreFault } from '../store-errors.js';
import type { ControllerStore } from '../store.js';
import { ensureAdminCredential, secretMatches, type AdminCredential } from './credential.js';
import { Enrolment } from './enrolment.js';
import { createLogger, type Logger } from './log.js';
import { Metrics, serveMetrics } from './metrics.js';
import { SessionHub, type SessionHubOptions } from './hub.js';
import { ExpiryClock } from './expiry-clock.js';
import type { FanOutOptions } from './fanout.js';
import { ensureCertificate, type ControllerTls } from './tls.js';
import { ensureVersionKey } from './version-key.js';
import { startConsole, type RunningConsole } from '../console/server.js';
import type { HistoryBook } from '../console/history.js';
import { SqliteHistoryStore } from '../console/history-store.js';
import { DEFAULT_EPHEMERAL_SWEEP_MS, EPHEMERAL_ACTOR, EphemeralReaper } from './ephemeral.js';
import type { InternalCall } from './admin.js';
import { ADDRESS_FILE } from './names.js';

export const CONTROLLER_DB = 'controller.db';
/** Acks and sends reach the disk by group commit, at most this long after (controller/group-commit.ts, `flushSync`). */
export const DEFAULT_SYNC_FLUSH_MS = 1_000;
export { ADDRESS_FILE } from './names.js';

export interface ControllerHostingOptions {
  /** HOST:PORT for the Control and Admin services. */
  listen: string;
  /** HOST:PORT for Prometheus /metrics; none when absent. */
  metricsListen?: string;
  /** Networks made on first start (default: "default"). */
  networks?: string[];
  /** Changes kept per network for deltas. */
  logDepth?: number;
  maxMessageBytes?: number;
  log?: Logger;
  /** Group commit of sync records (ms; Controller's `syncFlushMs`). Default 1000. */
  syncFlushMs?: number;
  /** How the fan-out of a change is cut into turns of the event loop (fanout.ts). */
  fanout?: FanOutOptions;
  /** Sync streams one connection may hold at once (default 4; more for agents behind a multiplexing proxy). */
  streamsPerConnection?: number;
  /** A tunnel member none of whose peers handshaked within this many seconds is `no-handshake` (default HANDSHAKE_STALE_SECONDS, 205). */
  handshakeStaleSeconds?: number;
  /** The state elsewhere than the state folder's SQLite file: a database shared by replicas (store-postgres). */
  store?: SharedStore;
  /** HOST:PORT for the web console (HTTPS, the controller's certificate); none when absent. */
  consoleListen?: string;
  /** How long a console session lasts from sign-in (seconds; console/server.ts's default when absent). */
  consoleSessionSeconds?: number;
  /** The console's convergence history: its window and its sample interval (ms; console/history.ts's defaults when absent). */
  consoleHistoryMs?: number;
  consoleSampleMs?: number;
  /** Audit log entries older than this many seconds are trimmed (default DEFAULT_AUDIT_RETENTION_SECONDS, 90 days). */
  auditRetentionSeconds?: number;
  /** How often ephemeral nodes are looked at (ms; default DEFAULT_EPHEMERAL_SWEEP_MS): one gone past its grace is removed (ephemeral.ts). */
  ephemeralSweepMs?: number;
}

/** The controller's store and the hosting's tokens and credentials in one shared database; `follow` starts learning of the other replicas' changes. */
export interface SharedStore {
  controller: ControllerStore;
  auth: AuthBook;
  /** The audit log in the shared database (issue 28): one log for every replica. */
  audit?: AuditBook;
  /** The named admin credentials in the shared database (issue 28): a revocation holds on every replica. */
  admins?: AdminCredentialBook;
  /** The console's convergence history in the shared database (issue 30): kept across restarts. */
  history?: HistoryBook;
  /** Where, for the log (no password). */
  label: string;
  follow(): Promise<void>;
  unfollow(): Promise<void>;
  /** Applies what the other replicas committed, now (before an Enrol or admin call: its checks see their changes). */
  catchUp(): void;
}

export interface RunningController {
  address: string;
  metricsAddress: string | null;
  /** https://HOST:PORT/ of the web console, null when it is off. */
  consoleUrl: string | null;
  fingerprint: string;
  controller: Controller;
}

/** Admin calls that show nodes' gaps: on a shared store, those of nodes on other replicas are read as those wrote them. */
const SHOWS_GAPS = new Set(['listNodes', 'showNode', 'doctor']);

/** With a shared store, every admin call first catches up with the other replicas. */
function fresh(shared: SharedStore | undefined, secret: string, controller: Controller, hub: SessionHub, handler: AdminHandler): AdminHandler {
  if (!shared) return handler;
  return async (method, request, credential, peer) => {
    // A caller without the credential costs no database read: the handler refuses it.
    if (!credential || !(secretMatches(credential, secret) || couldBeAdmin(credential))) return handler(method, request, credential, peer);
    // A store that commits without waiting catches up in the call's own change (admin.ts, controller.change).
    if (!controller.asyncStore) shared.catchUp();
    const network = ('network' in request && typeof request.network === 'string' && request.network) || DEFAULT_NETWORK;
    // A store that does not answer: the gaps as this replica knows them (a read answers from memory).
    if (SHOWS_GAPS.has(method) && controller.networks().includes(network))
      await controller
        .reloadSyncAsync(network, (id) => hub.live(network, id).connected)
        .catch((e: unknown) => {
          if (!isStoreFault(e)) throw e;
        });
    return handler(method, request, credential, peer);
  };
}

/** How often the controller looks whether a network's relay credentials are due (issue 27). */
const RELAY_RENEW_CHECK_MS = 60_000;

export class ControllerHostingPlugin implements Plugin {
  readonly name = 'controller';
  readonly apiVersion = PLUGIN_API_VERSION;
  readonly #o: ControllerHostingOptions;
  readonly log: Logger;
  #host?: PluginHost;
  #clock: ExpiryClock | null = null;
  #running: {
    listener: TransportListener;
    metrics: { close(): Promise<void> } | null;
    console: RunningConsole | null;
    hub: SessionHub;
    controller: Controller;
    auth: AuthBook;
    renewal: ReturnType<typeof setInterval>;
    reaper: EphemeralReaper;
  } | null = null;
  /** The audit log (issue 28): the shared database's, else the state folder's SQLite file. */
  #audit: AuditBook | null = null;
  /** The named admin credentials (issue 28): the shared database's, else the state folder's SQLite file. */
  #admins: AdminCredentialBook | null = null;
  #fingerprint = '';

  constructor(options: ControllerHostingOptions) {
    if (!/:\d+$/.test(options.listen)) throw usage(`--listen ${options.listen} is not HOST:PORT`);
    if (options.consoleListen !== undefined && !/:\d+$/.test(options.consoleListen)) throw usage(`--console-listen ${options.consoleListen} is not HOST:PORT`);
    if (options.logDepth !== undefined && !(Number.isInteger(options.logDepth) && options.logDepth >= 1)) {
      throw usage(`--log-depth ${options.logDepth} is not a whole number of changes, 1 or more`);
    }
    this.#o = options;
    this.log = options.log ?? createLogger('meshp-controller');
  }

  apply(host: PluginHost): void {
    this.#host = host;
  }

  /** Opens the state, then serves: the steps below, in this order. */
  async start(): Promise<RunningController> {
    const host = this.#host;
    if (!host) throw new MeshpError('MESHP_PLUGIN_INVALID', 'the controller plugin was not applied to a host');
    const dir = host.options.stateDir;
    const { tls, admin, controller, auth } = this.#openState(dir);
    const metrics = new Metrics();
    const hub = new SessionHub(controller, auth, metrics, this.log, this.#hubOptions());
    const enrolment = new Enrolment(controller, auth, tls.fingerprint);
    // Another replica's change, applied here: the agents connected here get their deltas (after the call that caught up).
    // The clock that records expiries as they come (expiry-clock.ts, ADR 0041).
    const clock = new ExpiryClock({ controller, log: this.log, poke: (n) => hub.poke(n), end: (n, id, e) => hub.endNode(n, id, e) });
    this.#clock = clock;
    hub.onExpiryMoved = (at) => clock.arm(at);
    controller.onRemoteChange = (n) =>
      setImmediate(() => {
        hub.poke(n);
        clock.arm();
      });
    // A change committed without waiting (a store across the network): what was held for its network goes now.
    controller.onSettled = (n) => setImmediate(() => hub.settled(n));
    await this.#o.store?.follow();
    const transport = await host.transport();
    const deps = { controller, enrolment, metrics, hub, auth };
    const inner = this.#admin(admin.secret, deps, this.log);
    const adminApi = fresh(this.#o.store, admin.secret, controller, hub, inner);
    const reaper = this.#reaper(inner.as, controller, auth, hub);
    // The console's live pages read again every half second: those reads are logged only when refused.
    const liveReads = fresh(this.#o.store, admin.secret, controller, hub, this.#admin(admin.secret, deps, this.log.child({}, { level: 'warn' })));
    const listener = await transport.listen(
      { address: this.#o.listen, certPem: tls.certPem, keyPem: tls.keyPem, maxMessageBytes: this.#o.maxMessageBytes },
      { control: this.#control(enrolment, metrics, hub), ...this.#refusals(metrics), admin: adminApi },
    );
    return this.#serving(dir, tls, { listener, hub, controller, auth, metrics, adminApi, liveReads, reaper });
  }

  /** Ephemeral nodes gone past their grace, removed as `node remove` by the actor `ephemeral` (ephemeral.ts). */
  #reaper(as: InternalCall, controller: Controller, auth: AuthBook, hub: SessionHub): EphemeralReaper {
    const shared = this.#o.store;
    const remove = as(EPHEMERAL_ACTOR);
    return new EphemeralReaper({
      controller,
      auth,
      live: (n, id) => hub.live(n, id),
      remove: async (network, node) => {
        if (!controller.asyncStore) shared?.catchUp();
        return remove('removeNode', { network, node, ephemeral: true });
      },
      log: this.log,
      sweepMs: this.#o.ephemeralSweepMs ?? DEFAULT_EPHEMERAL_SWEEP_MS,
    });
  }

  /** The state folder: its certificate and admin credential (made on first start), the controller's store and the hosting's. */
  #openState(dir: string): { tls: ControllerTls; admin: AdminCredential; controller: Controller; auth: AuthBook } {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    const listenHost = this.#o.listen.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');
    const tls = ensureCertificate(dir, listenHost && listenHost !== '0.0.0.0' ? [listenHost] : []);
    const admin = ensureAdminCredential(dir, tls.fingerprint);
    const dbFile = join(dir, CONTROLLER_DB);
    const shared = this.#o.store;
    const controller = new Controller(shared?.controller ?? new SqliteControllerStore(dbFile), {
      ...(this.#o.logDepth ? { logDepth: this.#o.logDepth } : {}),
      signer: ensureVersionKey(dir),
      syncFlushMs: this.#o.syncFlushMs ?? DEFAULT_SYNC_FLUSH_MS,
    });
    for (const n of this.#o.networks ?? [DEFAULT_NETWORK]) if (!controller.networks().includes(n)) controller.createNetwork(n);
    this.#applyLogDepth(controller);
    // Its errors are the store's health too (auth-guard.ts); an outage is logged once when it starts and once when it ends.
    const auth = guardAuth(shared?.auth ?? new AuthStore(dbFile), controller.storeHealth, shared ? undefined : dbFile);
    this.#audit = shared?.audit ?? new SqliteAuditStore(dbFile);
    this.#admins = shared ? (shared.admins ?? null) : new SqliteAdminCredentialStore(dbFile);
    this.#fingerprint = tls.fingerprint;
    controller.storeHealth.onChange = (h) => {
      if (h.up) this.log.warn({ store: shared?.label ?? CONTROLLER_DB }, 'store up again: changes are taken');
      else
        this.log.error(
          { store: shared?.label ?? CONTROLLER_DB, code: h.lastCode, err: h.lastError, since: h.downSince },
          'store down: changes are refused, reads answer from memory, the sync records wait',
        );
    };
    return { tls, admin, controller, auth };
  }

  /** --log-depth holds for the networks there already, not only for those made from now on. */
  #applyLogDepth(controller: Controller): void {
    const depth = this.#o.logDepth;
    for (const n of controller.networks()) {
      const was = controller.logDepth(n);
      if (depth === undefined || was === depth) continue;
      controller.setLogDepth(n, depth);
      this.log.info({ network: n, from: was, to: depth }, 'log depth set');
    }
  }

  #hubOptions(): SessionHubOptions {
    return {
      ...(this.#o.fanout ? { fanout: this.#o.fanout } : {}),
      ...(this.#o.streamsPerConnection !== undefined ? { streamsPerConnection: this.#o.streamsPerConnection } : {}),
      ...(this.#o.handshakeStaleSeconds !== undefined ? { handshakeStaleSeconds: this.#o.handshakeStaleSeconds } : {}),
    };
  }

  /** The Control service: Enrol, the Sync streams, and the bytes of the deltas sent. */
  #control(enrolment: Enrolment, metrics: Metrics, hub: SessionHub): ControlHandlers {
    const shared = this.#o.store;
    const { controller } = hub;
    return {
      enrol: async (input, peer) => {
        try {
          // A store that commits without waiting: the enrolment is one change (after catching up), the event loop runs on.
          if (!controller.asyncStore) shared?.catchUp();
          const { resumed, ...r } = enrolment.asyncStore ? await enrolment.enrolAsync(input) : await controller.change(() => enrolment.enrol(input));
          if (resumed) {
            this.log.info(
              { network: r.network, node: r.node, peer },
              'enrolment completed again: a new credential for the same key (the first answer was lost)',
            );
            return r;
          }
          metrics.enrolments++;
          this.log.info({ network: r.network, node: r.node, mode: r.mode, peer }, 'node enrolled');
          // The answer goes first: the peers learn of the join after this call returned (hub.poke only schedules).
          hub.poke(r.network);
          // Its expiry may be the earliest (a network with a short node lifetime): the clock looks again if so.
          hub.expiryMoved(controller.member(r.network, r.node)?.expiresAt ?? undefined);
          return r;
        } catch (e) {
          metrics.refused(isMeshpError(e) ? e.code : 'MESHP_PLUGIN_FAILED');
          this.log.warn({ peer, node: input.node, code: isMeshpError(e) ? e.code : undefined, err: oneLine(e) }, 'enrolment refused');
          throw e;
        }
      },
      sync: (channel, peer) => hub.open(channel, peer),
      deltaBytes: (bytes) => {
        metrics.bytesSent += bytes;
      },
    };
  }

  /** What the transport refused or could not encode, counted and logged. */
  #refusals(metrics: Metrics): { refused: Refused; unencodable: Unencodable } {
    return {
      refused: (r) => {
        metrics.refused(r.code);
        this.log.warn(r, 'refused by the transport');
      },
      unencodable: (r) => {
        metrics.refused('MESHP_INTERNAL');
        this.log.error(
          { ...r, code: 'MESHP_INTERNAL' },
          r.method === 'sync' ? 'delta not encoded: the stream ends, the agent gets nothing' : 'answer not encoded: the call ends with an internal error',
        );
      },
    };
  }

  /** The Admin service; a node removed has its credential and key revoked and its stream ended, one renamed keeps them. */
  #admin(
    secret: string,
    { controller, enrolment, metrics, hub, auth }: { controller: Controller; enrolment: Enrolment; metrics: Metrics; hub: SessionHub; auth: AuthBook },
    log: Logger,
  ): ReturnType<typeof adminHandler> {
    return adminHandler({
      ...(this.#audit ? { audit: { book: this.#audit, retentionSeconds: this.#o.auditRetentionSeconds ?? DEFAULT_AUDIT_RETENTION_SECONDS } } : {}),
      ...(this.#admins ? { admins: { book: this.#admins, fingerprint: this.#fingerprint } } : {}),
      controller,
      enrolment,
      secret,
      metrics,
      log,
      changed: (n) => hub.poke(n),
      live: (n, id) => hub.live(n, id),
      reports: (n, id) => hub.reportOf(n, id),
      ...(auth.loadReportsAsync ? { loadReports: auth.loadReportsAsync.bind(auth) } : {}),
      removed: (n, id, nodeKey) => {
        hub.endNode(n, id, { code: 'MESHP_NODE_REVOKED', message: `node ${id} was removed from ${n}` });
        // The removal stands whatever the revocation meets (its credential names no member now: a
        // hello with it is refused); one the store refuses leaves the key off the revoked list, said.
        const refused = (e: unknown) => {
          if (!isStoreFault(e)) throw e;
          this.log.error(
            { network: n, node: id, code: e.code, err: oneLine(e) },
            'node removed; its credential and key could not be revoked: the store refused the write',
          );
        };
        const revoked = () => this.log.warn({ network: n, node: id }, 'node removed: credential and key revoked');
        const at = new Date().toISOString();
        // A store across the network: written without the event loop waiting.
        if (auth.revokeAsync)
          return void auth.revokeAsync(n, id, nodeKey, at).then(revoked, (e: unknown) => {
            if (isStoreFault(e)) refused(e);
            else this.log.error({ network: n, node: id, err: oneLine(e) }, 'node removed; its credential and key could not be revoked');
          });
        try {
          auth.revoke(n, id, nodeKey, at);
        } catch (e) {
          return refused(e);
        }
        revoked();
      },
      expiryMoved: (at) => hub.expiryMoved(at),
      rekey: (n, id, ask) => hub.rekey(n, id, ask),
      renaming: (n, from, to) => auth.rename(n, from, to),
      ...(auth.renameAsync ? { renamingAsync: auth.renameAsync.bind(auth) } : {}),
      renamed: (n, from, to) => {
        hub.renamed(n, from, to);
        this.log.info({ network: n, from, to }, 'node renamed');
      },
    });
  }

  /** Listening: /metrics beside it, the address written for the CLI, the running parts kept for stop(). */
  async #serving(
    dir: string,
    tls: ControllerTls,
    r: {
      listener: TransportListener;
      hub: SessionHub;
      controller: Controller;
      auth: AuthBook;
      metrics: Metrics;
      adminApi: AdminHandler;
      liveReads: AdminHandler;
      reaper: EphemeralReaper;
    },
  ): Promise<RunningController> {
    const { listener, hub, controller, auth, metrics, reaper } = r;
    const fingerprint = tls.fingerprint;
    metrics.attach({ controller, connected: () => hub.connected, live: (n, id) => hub.live(n, id), handshakeStaleSeconds: hub.handshakeStaleSeconds });
    const m = this.#o.metricsListen ? await serveMetrics(this.#o.metricsListen, () => metrics.render(), metrics.registry.contentType) : null;
    // The console reads the controller through the Admin API it is handed, with the controller's own certificate.
    let web: RunningConsole | null = null;
    try {
      web = await this.#console(dir, tls, r, metrics);
    } catch (e) {
      // Not served at all rather than served without its console: what was opened is closed again.
      hub.closeAll();
      await listener.close();
      await m?.close();
      throw e;
    }
    writeFileSync(join(dir, ADDRESS_FILE), `${listener.address}\n`);
    reaper.start();
    this.#running = { listener, metrics: m, console: web, hub, controller, auth, renewal: this.#relayRenewal(controller, hub), reaper };
    this.#clock?.arm();
    this.log.info(
      {
        address: listener.address,
        metrics: m?.address ?? null,
        console: web?.url ?? null,
        fingerprint,
        networks: controller.networks(),
        store: this.#o.store?.label ?? CONTROLLER_DB,
      },
      'controller serving',
    );
    return { address: listener.address, metricsAddress: m?.address ?? null, consoleUrl: web?.url ?? null, fingerprint, controller };
  }

  /** The console on its own listener (`--console-listen`), or none: it reads the controller through the Admin API it is handed. */
  async #console(dir: string, tls: ControllerTls, r: { adminApi: AdminHandler; liveReads: AdminHandler }, metrics: Metrics): Promise<RunningConsole | null> {
    if (!this.#o.consoleListen) return null;
    const session = this.#o.consoleSessionSeconds;
    // The chart's samples in the controller's store: the shared database's, else the state folder's SQLite file.
    const book = this.#o.store ? this.#o.store.history : new SqliteHistoryStore(join(dir, CONTROLLER_DB));
    return startConsole({
      listen: this.#o.consoleListen,
      tls,
      admin: r.adminApi,
      reads: r.liveReads,
      log: this.log,
      gaps: () => metrics.nodes().map((n) => ({ network: n.network, node: n.name, gap: n.gap })),
      ...(session ? { sessionSeconds: session } : {}),
      history: {
        ...(book ? { book } : {}),
        ...(this.#o.consoleHistoryMs ? { windowMs: this.#o.consoleHistoryMs } : {}),
        ...(this.#o.consoleSampleMs ? { sampleMs: this.#o.consoleSampleMs } : {}),
      },
    });
  }

  /**
   * The relays' credentials renewed (issue 27, ADR 0040): once a minute, every network whose
   * credentials have half their lifetime gone gets new ones in one version, sent to its members.
   */
  #relayRenewal(controller: Controller, hub: SessionHub): ReturnType<typeof setInterval> {
    const renew = async (n: string) => {
      try {
        if ((await controller.change(() => controller.renewRelayCredentials(n))) !== null) hub.poke(n);
      } catch (e) {
        this.log.warn({ network: n, code: isMeshpError(e) ? e.code : undefined, err: oneLine(e) }, 'relay credentials not renewed: tried again in a minute');
      }
    };
    const t = setInterval(() => {
      for (const n of controller.networks()) void renew(n);
    }, RELAY_RENEW_CHECK_MS);
    t.unref();
    return t;
  }

  async stop(): Promise<void> {
    const r = this.#running;
    if (!r) return;
    this.#running = null;
    clearInterval(r.renewal);
    this.#clock?.stop();
    this.#clock = null;
    await r.reaper.stop();
    r.hub.closeAll();
    await r.console?.close();
    await r.listener.close();
    await r.metrics?.close();
    await this.#o.store?.unfollow();
    r.auth.close();
    this.#audit?.close();
    this.#audit = null;
    this.#admins?.close();
    this.#admins = null;
    r.controller.close();
    this.log.info({}, 'controller stopped');
  }
}

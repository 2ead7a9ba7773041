/** `meshp controller serve`: the controller plugin on a server host with the gRPC transport. */
import { Host } from '@meshp/core/host';
import { MeshpError } from '@meshp/core';
import { usage } from '@meshp/core/util';
import { parseTtl } from './ops.js';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  AuthStore,
  CONTROLLER_DB,
  ControllerHostingPlugin,
  SqliteAdminCredentialStore,
  SqliteAuditStore,
  SqliteControllerStore,
  checkHandshakeStale,
  checkStreamsPerConnection,
  historySpan,
  DEFAULT_SAMPLE_MS,
  DEFAULT_WINDOW_MS,
  type SharedStore,
} from '@meshp/controller';
import { GrpcTransportPlugin } from '@meshp/transport-grpc';

export interface ServeArgs {
  state: string;
  listen: string;
  metricsListen?: string;
  networks: string[];
  logDepth?: number;
  syncFlushMs?: number;
  /** 'sqlite' (the default) or a postgres:// URL. */
  store?: string;
  /** Sync streams one connection may hold (agents behind a multiplexing proxy). */
  streamsPerConnection?: number;
  /** Seconds without a handshake with any tunnel peer before a tunnel member is no-handshake. */
  handshakeStaleSeconds?: number;
  /** HOST:PORT for the web console. */
  consoleListen?: string;
  /** A console session's length, as `--ttl` reads it (90s, 15m, 1h). */
  consoleSession?: string;
  /** `--console-history`, `--console-sample`: the convergence chart's window and sample interval, as durations (1h, 5s). */
  consoleHistory?: string;
  consoleSample?: string;
  /** `--audit-retention`: a duration (90d). */
  auditRetention?: string;
  /** How often ephemeral nodes are looked at (ms). */
  ephemeralSweepMs?: number;
}

/** `--store`: none or 'sqlite', the state folder's SQLite file; a postgres:// URL, that database (migrated first). */
export async function sharedStore(store: string | undefined): Promise<SharedStore | undefined> {
  if (store === undefined || store === 'sqlite') return undefined;
  const { isPostgresUrl, openPostgresStore } = await import('@meshp/store-postgres');
  if (!isPostgresUrl(store)) throw usage("--store is 'sqlite' or a postgres:// URL");
  const say = (line: string) => process.stderr.write(`meshp controller: ${line}\n`);
  const pg = await openPostgresStore(store, {
    onError: (e) => say(`the database follower: ${e.message}`),
    // Once per outage (docs/store-postgres.md, an outage): the replica serves on, changes are refused until it answers.
    onDown: (reason) => say(`the database is unreachable (${reason}): changes are refused MESHP_STORE_UNAVAILABLE, reads answer from memory, retrying`),
    onUp: (ms) => say(`the database answers again after ${Math.round(ms)} ms: catching up`),
  });
  return {
    controller: pg.store,
    auth: pg.auth,
    audit: pg.audit,
    admins: pg.admins,
    history: pg.history,
    label: pg.label,
    follow: () => pg.follower.start(),
    unfollow: () => pg.follower.close(),
    // Before an admin call or an enrolment; while the database is down, reads answer from memory (store-postgres freshen).
    catchUp: () => pg.store.freshen(),
  };
}

/** `meshp controller copy-store`: the state folder's controller.db into an empty PostgreSQL database (store-postgres copy.ts). */
export async function copyStore(state: string, to: string): Promise<Record<string, number>> {
  const { copyState, isPostgresUrl, openPostgresStore } = await import('@meshp/store-postgres');
  if (!isPostgresUrl(to)) throw usage('--to is a postgres:// URL');
  const file = join(state, CONTROLLER_DB);
  if (!existsSync(file)) throw new MeshpError('MESHP_NOT_FOUND', `no ${CONTROLLER_DB} in ${state}`);
  const sqlite = new SqliteControllerStore(file);
  const auth = new AuthStore(file);
  // The audit log and the named admin credentials too (issue 28): they are the controller's, not the replica's.
  const audit = new SqliteAuditStore(file);
  const admins = new SqliteAdminCredentialStore(file);
  const pg = await openPostgresStore(to);
  try {
    return { ...copyState(pg.db, sqlite.load(), auth.dump(), { audit: audit.dump(), admins: admins.dump() }) };
  } finally {
    sqlite.close();
    auth.close();
    audit.close();
    admins.close();
    await pg.close();
  }
}

/** `--console-history` and `--console-sample`, each a duration, checked together (console/history.ts historySpan): MESHP_USAGE when they make no sense. */
export function consoleHistorySpan(window: string | undefined, sample: string | undefined): { windowMs: number; sampleMs: number } {
  const ms = (flag: string, v: string | undefined, dflt: number) => {
    if (v === undefined) return dflt;
    if (!/^\d+\s*(s|m|h|d)?$/.test(v.trim())) throw usage(`${flag} ${v} is not a duration (5s, 30m, 1h, 1d)`);
    return parseTtl(v) * 1000;
  };
  return historySpan(ms('--console-history', window, DEFAULT_WINDOW_MS), ms('--console-sample', sample, DEFAULT_SAMPLE_MS));
}

export async function serveController(a: ServeArgs): Promise<void> {
  // Checked before anything is made (the state folder, the store).
  if (a.streamsPerConnection !== undefined) checkStreamsPerConnection(a.streamsPerConnection);
  if (a.handshakeStaleSeconds !== undefined) checkHandshakeStale(a.handshakeStaleSeconds);
  const consoleSessionSeconds = a.consoleSession !== undefined ? parseTtl(a.consoleSession) : undefined;
  if (consoleSessionSeconds === 0) throw usage('--console-session is a duration longer than 0');
  const span = consoleHistorySpan(a.consoleHistory, a.consoleSample);
  const auditRetentionSeconds = a.auditRetention === undefined ? undefined : parseTtl(a.auditRetention);
  if (auditRetentionSeconds === 0) throw usage('--audit-retention is a duration longer than 0 (90d)');
  if (a.ephemeralSweepMs !== undefined && !(Number.isInteger(a.ephemeralSweepMs) && a.ephemeralSweepMs >= 50 && a.ephemeralSweepMs <= 3_600_000))
    throw usage(`--ephemeral-sweep-ms ${a.ephemeralSweepMs} is not a whole number of milliseconds between 50 and 3600000`);
  const store = await sharedStore(a.store);
  const plugin = new ControllerHostingPlugin({
    listen: a.listen,
    metricsListen: a.metricsListen,
    networks: a.networks,
    logDepth: a.logDepth,
    ...(a.syncFlushMs !== undefined ? { syncFlushMs: a.syncFlushMs } : {}),
    ...(a.streamsPerConnection !== undefined ? { streamsPerConnection: a.streamsPerConnection } : {}),
    ...(a.handshakeStaleSeconds !== undefined ? { handshakeStaleSeconds: a.handshakeStaleSeconds } : {}),
    ...(store ? { store } : {}),
    ...(a.consoleListen ? { consoleListen: a.consoleListen } : {}),
    ...(consoleSessionSeconds ? { consoleSessionSeconds } : {}),
    consoleHistoryMs: span.windowMs,
    consoleSampleMs: span.sampleMs,
    ...(auditRetentionSeconds !== undefined ? { auditRetentionSeconds } : {}),
    ...(a.ephemeralSweepMs !== undefined ? { ephemeralSweepMs: a.ephemeralSweepMs } : {}),
  });
  new Host({ stateDir: a.state }).use(new GrpcTransportPlugin(), plugin);
  await plugin.start();
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      void plugin.stop().then(resolve);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

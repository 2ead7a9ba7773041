/**
 * The web console (`controller serve --console-listen HOST:PORT`): its own HTTPS listener with the
 * controller's own certificate, Fastify with its kept plugins — @fastify/helmet (a strict content
 * security policy: scripts from this origin only), @fastify/cookie and @fastify/session (the session),
 * @fastify/csrf-protection, @fastify/static (the script and style, shipped in the package: no CDN; the pages
 * are made from one layout at start, pages.ts), fastify-sse-v2
 * (the live pages). It reads and changes the controller only through the Admin API (admin-call.ts).
 */
import { randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import fastifyCookie from '@fastify/cookie';
import fastifyCsrf from '@fastify/csrf-protection';
import fastifyHelmet from '@fastify/helmet';
import fastifySession from '@fastify/session';
import fastifyStatic from '@fastify/static';
import { MeshpError, type AdminHandler } from '@meshp/core';
import { usage } from '@meshp/core/util';
import Fastify, { type FastifyInstance, type FastifyRequest } from 'fastify';
import { FastifySSEPlugin } from 'fastify-sse-v2';
import type { Logger } from '../hosting/log.js';
import { authRoutes, originGuard, refusal } from './auth.js';
import { liveRoutes } from './live.js';
import { actionRoutes } from './actions.js';
import { renderPages } from './pages.js';
import { ConvergenceHistory, type GapOf, type HistoryBook } from './history.js';

/** The cookie that carries the session's signed id, and nothing else. */
export const SESSION_COOKIE = 'meshp_console';
/** A session lasts this long from sign-in (a new sign-in for more): short, as the credential it stands for is the admin's. */
export const DEFAULT_SESSION_SECONDS = 15 * 60;
/** How often a live page's view is read again. */
export const DEFAULT_POLL_MS = 500;

export interface ConsoleOptions {
  /** HOST:PORT. */
  listen: string;
  /** The controller's own TLS identity (hosting/tls.ts). */
  tls: { certPem: string; keyPem: string };
  /** The Admin API as the transport serves it: sign-in, and every action. */
  admin: AdminHandler;
  /** The same API for the live pages' reads, logged only when refused (they read twice a second). */
  reads: AdminHandler;
  log: Logger;
  sessionSeconds?: number;
  pollMs?: number;
  /** Every node's gap as the controller sees it now: sampled for the convergence chart (history.ts). */
  gaps?: () => GapOf[];
  /** Where the samples are kept across restarts, for how long, how often (history.ts's defaults: an hour, every 5 s). */
  history?: { book?: HistoryBook; windowMs?: number; sampleMs?: number };
}

export interface RunningConsole {
  /** https://HOST:PORT/ */
  url: string;
  address: string;
  close(): Promise<void>;
}

/** The layout, the pages' parts, their script and style, shipped beside dist/ in the package. */
export const PUBLIC_DIR = fileURLToPath(new URL('../../console/', import.meta.url));
/** The charting library (uPlot), a dependency of this package, served from this origin: no CDN. */
const UPLOT_DIR = dirname(createRequire(import.meta.url).resolve('uplot'));

type Store = fastifySession.SessionStore;

async function register(app: FastifyInstance, o: ConsoleOptions, store: Store): Promise<void> {
  const seconds = o.sessionSeconds ?? DEFAULT_SESSION_SECONDS;
  await app.register(fastifyHelmet, {
    contentSecurityPolicy: {
      directives: { defaultSrc: ["'self'"], scriptSrc: ["'self'"], styleSrc: ["'self'"], connectSrc: ["'self'"], formAction: ["'self'"] },
    },
  });
  await app.register(fastifyCookie);
  await app.register(fastifySession, {
    // Signs the cookie's session id; made at each start, so a restart ends every session.
    secret: randomBytes(32).toString('base64url'),
    cookieName: SESSION_COOKIE,
    store,
    saveUninitialized: false,
    rolling: false,
    cookie: { secure: true, httpOnly: true, sameSite: 'strict', path: '/', maxAge: seconds * 1000 },
  });
  await app.register(fastifyCsrf, { sessionPlugin: '@fastify/session' });
  await app.register(FastifySSEPlugin);
  // The script and the style; the pages are made from the layout at start (pages.ts), not served as files.
  await app.register(fastifyStatic, {
    root: PUBLIC_DIR,
    index: false,
    cacheControl: false,
    allowedPath: (p) => /^\/console\.(js|css)$/.test(p),
    setHeaders: (reply) => reply.header('cache-control', 'no-store'),
  });
  for (const [path, html] of renderPages(PUBLIC_DIR)) {
    app.get(path, (_request, reply) => reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').send(html));
  }
  await app.register(fastifyStatic, {
    root: UPLOT_DIR,
    prefix: '/vendor/uplot/',
    decorateReply: false,
    allowedPath: (p) => /^\/uPlot\.(iife\.min\.js|min\.css)$/.test(p),
  });
}

/** A session is alive while the store holds it and it has not expired (a stream opened before its end checks this at every poll). */
function aliveIn(store: Store) {
  return (request: FastifyRequest) =>
    new Promise<boolean>((resolve) => {
      store.get(request.session.sessionId, (err, s) => {
        const expires = s?.cookie?.expires ? new Date(s.cookie.expires).getTime() : Infinity;
        resolve(!err && !!s && !!(s as { credential?: string }).credential && expires > Date.now());
      });
    });
}

export async function startConsole(o: ConsoleOptions): Promise<RunningConsole> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(o.listen);
  if (!m) throw usage(`--console-listen ${o.listen} is not HOST:PORT`);
  const app = Fastify({ https: { cert: o.tls.certPem, key: o.tls.keyPem }, logger: false, bodyLimit: 64 * 1024 });
  const store = new fastifySession.MemoryStore();
  await register(app, o, store);
  originGuard(app);
  authRoutes(app, o.admin, o.log);
  actionRoutes(app, o.admin);
  const history = new ConvergenceHistory({
    gaps: o.gaps ?? (() => []),
    ...o.history,
    onError: (e) => o.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'console: a convergence sample failed (missed)'),
  });
  app.addHook('onClose', async () => history.close());
  liveRoutes(app, { handler: o.reads, alive: aliveIn(store), pollMs: o.pollMs ?? DEFAULT_POLL_MS, history });
  app.setErrorHandler((e: Error & { statusCode?: number; code?: string }, _request, reply) => {
    const status = e.statusCode && e.statusCode >= 400 ? e.statusCode : 500;
    // @fastify/csrf-protection's refusal: FST_CSRF_MISSING_SECRET, FST_CSRF_INVALID_TOKEN.
    if (e.code?.startsWith('FST_CSRF')) return refusal(reply, 403, 'MESHP_AUTH_FAILED', 'the request carries no valid CSRF token of this session');
    if (e instanceof MeshpError) return refusal(reply, status === 500 ? 422 : status, e.code, e.message);
    if (status >= 500) o.log.error({ err: e.message }, 'console: request failed');
    return refusal(reply, status, status >= 500 ? 'MESHP_INTERNAL' : 'MESHP_USAGE', status >= 500 ? 'the console failed this request' : e.message);
  });
  try {
    await app.listen({ host: m[1], port: Number(m[2]) });
  } catch (cause) {
    history.close();
    throw new MeshpError('MESHP_UNAVAILABLE', `cannot listen on ${o.listen}`, { cause });
  }
  const port = (app.server.address() as { port: number }).port;
  const address = `${m[1]}:${port}`;
  return { url: `https://${m[1]!.includes(':') ? `[${m[1]}]` : m[1]}:${port}/`, address, close: () => app.close() };
}

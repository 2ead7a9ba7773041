/**
 * Signing in to the console: the admin credential, checked by the Admin API itself, is exchanged for
 * a short-lived session (@fastify/session: an HttpOnly, Secure, SameSite=Strict cookie holding only
 * the session's signed id). The credential stays in the server's session store, never in a page.
 * Every action carries the session's CSRF token (@fastify/csrf-protection); a request from another
 * site's Origin is refused before any route runs. Sign-out destroys the session.
 */
import { MeshpError } from '@meshp/core';
import type { AdminHandler } from '@meshp/core';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { consoleAdmin, type ConsoleAdmin } from './admin-call.js';
import { parseAdminCredential } from '../hosting/credential.js';
import type { Logger } from '../hosting/log.js';

declare module 'fastify' {
  interface Session {
    /** The secret the operator signed in with: what this session's Admin calls present. */
    credential?: string;
    signedInAt?: string;
    /** Who signed in and whether its role may change anything, as the Admin API's WhoAmI said at sign-in. */
    actor?: string;
    mayChange?: boolean;
  }
}

/** Methods that change nothing: no CSRF token needed (and none changes anything here). */
const SAFE = new Set(['GET', 'HEAD', 'OPTIONS']);

/** A refusal as the console answers it: the MESHP code and one line. */
export function refusal(reply: FastifyReply, status: number, code: string, message: string): FastifyReply {
  return reply.code(status).header('cache-control', 'no-store').send({ code, message });
}

/** A request from another site is refused whatever it carries: its Origin (or, without one, Sec-Fetch-Site) must be this console's. */
export function sameOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  if (origin !== undefined) return origin === `https://${request.host}`;
  const site = request.headers['sec-fetch-site'];
  return site === undefined || site === 'same-origin' || site === 'none';
}

export function originGuard(app: FastifyInstance): void {
  app.addHook('onRequest', async (request, reply) => {
    if (SAFE.has(request.method)) return;
    if (!sameOrigin(request)) return refusal(reply, 403, 'MESHP_AUTH_FAILED', 'a request from another site is refused');
  });
}

/** The session's Admin API, or a 401 answered (no session, an expired one, one signed out). */
export function sessionAdmin(handler: AdminHandler, request: FastifyRequest, reply: FastifyReply): ConsoleAdmin | null {
  const credential = request.session.get('credential');
  if (!credential) {
    void refusal(reply, 401, 'MESHP_AUTH_FAILED', 'not signed in (or the session expired): sign in again');
    return null;
  }
  return consoleAdmin(handler, credential, `console ${request.ip}`);
}

/**
 * Whether this session may change anything: the one check every action passes (and the page asks,
 * to offer none), from the role WhoAmI gave at sign-in. The Admin API checks the role again at each
 * call (a credential revoked since is refused there), so this is the console's first refusal, not its only one.
 */
export function mayChange(request: FastifyRequest): boolean {
  return !!request.session.get('credential') && request.session.get('mayChange') === true;
}

/** The secret of what was presented: a credential file's whole text, or its secret alone. */
function secretOf(presented: string): string {
  const text = presented.trim();
  return text.startsWith('meshp-admin1.') ? parseAdminCredential(text).secret : text;
}

interface SignIn {
  Body: { credential?: unknown };
}

export function authRoutes(app: FastifyInstance, handler: AdminHandler, log: Logger): void {
  app.post<SignIn>('/api/session', async (request, reply) => {
    const presented = request.body?.credential;
    if (typeof presented !== 'string' || !presented.trim()) return refusal(reply, 400, 'MESHP_USAGE', 'credential is required');
    try {
      const secret = secretOf(presented);
      // The Admin API checks it, as for a CLI call (a refusal is logged and counted there), and says who it is.
      const who = (await handler('whoAmI', {}, secret, `console ${request.ip}`)) as { name: string; mayChange: boolean };
      // A new session id at sign-in: a session id known before it (fixation) is worth nothing after.
      await request.session.regenerate();
      request.session.set('credential', secret);
      request.session.set('signedInAt', new Date().toISOString());
      request.session.set('actor', who.name);
      request.session.set('mayChange', who.mayChange);
    } catch (e) {
      const code = e instanceof MeshpError ? e.code : 'MESHP_AUTH_FAILED';
      return refusal(reply, 401, code, 'the credential is not the one this controller made');
    }
    log.info({ peer: request.ip, actor: request.session.get('actor') }, 'console: signed in');
    return reply
      .header('cache-control', 'no-store')
      .send({ signedIn: true, actor: request.session.get('actor'), mayChange: mayChange(request), csrf: reply.generateCsrf() });
  });

  // What the page's script needs to act: whether it is signed in, and this session's CSRF token.
  app.get('/api/session', async (request, reply) => {
    // Not signed in is an answer here, not a refusal: the page asks it first, to show the sign-in.
    if (!request.session.get('credential')) return reply.header('cache-control', 'no-store').send({ signedIn: false });
    return reply.header('cache-control', 'no-store').send({
      signedIn: true,
      since: request.session.get('signedInAt'),
      actor: request.session.get('actor'),
      mayChange: mayChange(request),
      csrf: reply.generateCsrf(),
    });
  });

  app.post('/api/signout', { onRequest: app.csrfProtection }, async (request, reply) => {
    if (!request.session.get('credential')) return refusal(reply, 401, 'MESHP_AUTH_FAILED', 'not signed in');
    await request.session.destroy();
    log.info({ peer: request.ip }, 'console: signed out');
    return reply.header('cache-control', 'no-store').send({ signedIn: false });
  });
}

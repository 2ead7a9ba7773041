/**
 * The pages kept live: one server-sent event stream per page (fastify-sse-v2), each a loop that reads
 * its view through the Admin API every `pollMs` and sends it when it differs from the last one sent.
 * A report, an ack or a change made through the CLI all show within one poll, and nothing of the
 * controller has to tell the console. The loop ends when the page goes, or when its session is over
 * (signed out elsewhere, or expired): the stream then ends with a `signedout` event.
 */
import type { AdminHandler } from '@meshp/core';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { EventMessage } from 'fastify-sse-v2';
import { DEFAULT_NETWORK } from '../hosting/admin.js';
import { sessionAdmin } from './auth.js';
import type { ConsoleAdmin } from './admin-call.js';
import { fleetOf, nodeViewOf } from './views.js';
import { policyViewOf } from './policy-view.js';
import { auditViewOf } from './audit-view.js';
import type { ConvergenceHistory } from './history.js';
import { notFound } from '@meshp/core/util';

/** Whether the session a stream was opened with is still in force (in the store, not expired). */
export type SessionAlive = (request: FastifyRequest) => Promise<boolean>;

export interface LiveOptions {
  handler: AdminHandler;
  alive: SessionAlive;
  pollMs: number;
  history: ConvergenceHistory;
}

const pause = (ms: number, signal: AbortSignal) =>
  new Promise<void>((resolve) => {
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
  });

/** The view, sent each time it changes, until the page goes or the session ends. */
async function* follow(
  request: FastifyRequest,
  o: LiveOptions,
  event: string,
  read: () => Promise<unknown>,
  signal: AbortSignal,
): AsyncGenerator<EventMessage> {
  let last = '';
  while (!signal.aborted) {
    if (!(await o.alive(request))) {
      yield { event: 'signedout', data: '{}' };
      return;
    }
    let data: string;
    try {
      data = JSON.stringify(await read());
    } catch (e) {
      // Said on the page and tried again: a node removed, a store down (reads answer from memory).
      data = JSON.stringify({ error: e instanceof Error ? e.message : String(e) });
    }
    if (data !== last) {
      last = data;
      yield { event, data };
    }
    await pause(o.pollMs, signal);
  }
}

interface Query {
  Querystring: { network?: string; node?: string; from?: string; to?: string };
}

function stream(o: LiveOptions, event: string, read: (admin: ConsoleAdmin, q: Query['Querystring']) => Promise<unknown>) {
  return async (request: FastifyRequest<Query>, reply: import('fastify').FastifyReply) => {
    const admin = sessionAdmin(o.handler, request, reply);
    if (!admin) return reply;
    const ended = new AbortController();
    request.raw.once('close', () => ended.abort());
    reply.header('cache-control', 'no-store');
    reply.sse(follow(request, o, event, () => read(admin, request.query), ended.signal));
    return reply;
  };
}

export function liveRoutes(app: FastifyInstance, o: LiveOptions): void {
  app.get<Query>(
    '/api/live/fleet',
    stream(o, 'fleet', (admin, q) => fleetOf(admin, q.network || DEFAULT_NETWORK)),
  );
  app.get<Query>(
    '/api/live/node',
    stream(o, 'node', (admin, q) => nodeViewOf(admin, q.network || DEFAULT_NETWORK, q.node ?? '')),
  );
  app.get<Query>(
    '/api/live/policy',
    stream(o, 'policy', (admin, q) => policyViewOf(admin, q.network || DEFAULT_NETWORK, { from: q.from ?? '', to: q.to ?? '' })),
  );
  app.get<Query>(
    '/api/live/audit',
    stream(o, 'audit', (admin, q) => auditViewOf(admin, q.network || DEFAULT_NETWORK, q.node ?? '')),
  );
  app.get<Query>(
    '/api/live/history',
    stream(o, 'history', async (admin, q) => {
      // Kept by the console, shown only to a session whose credential the Admin API lets read that network.
      const network = q.network || DEFAULT_NETWORK;
      const networks = (await admin('listNetworks', {})).networks ?? [];
      if (!networks.some((n) => n.name === network)) throw notFound('network', network);
      return o.history.view(network);
    }),
  );
}

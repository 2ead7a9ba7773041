/**
 * What the console may change, and only what a CLI user could: assign, take or unassign a module on
 * a node, converge a node to a preview it was shown, or return it to adopted. Each is said first
 * (`GET /api/would`, the words the CLI's preview prints) and done only on a confirmed `POST
 * /api/act`, which needs the session's CSRF token; a flip is made only for the preview id the page
 * showed, and the controller refuses a stale one (MESHP_PREVIEW_STALE), as for the CLI.
 */
import { MeshpError, type AdminHandler } from '@meshp/core';
import { WIRE_MODE } from '@meshp/core/delta';
import type { FastifyInstance } from 'fastify';
import { DEFAULT_NETWORK } from '../hosting/admin.js';
import { mayChange, refusal, sessionAdmin } from './auth.js';
import type { ConsoleAdmin } from './admin-call.js';
import { nodeViewOf } from './views.js';

export const VERBS = ['assign', 'take', 'unassign', 'converge', 'adopt'] as const;
export type Verb = (typeof VERBS)[number];

interface Act {
  verb: Verb;
  network?: string;
  node: string;
  module?: string;
  previewId?: string;
}

const NAME = { type: 'string', minLength: 1, maxLength: 253 } as const;
/** Checked by Fastify's schema validation before any handler runs: a bad request is a 400, nothing asked of the controller. */
const ACT_SCHEMA = {
  type: 'object',
  required: ['verb', 'node'],
  additionalProperties: false,
  properties: { verb: { type: 'string', enum: [...VERBS] }, network: NAME, node: NAME, module: NAME, previewId: { type: 'string', maxLength: 128 } },
} as const;

/** What each does, in the CLI's words (bin/src/remote/ops.ts `moduleChange`, lifecycle.ts `nodeAdopt`). */
const WHAT: Record<Verb, string> = {
  assign: 'its resources are prepared; what is found is held, nothing is overwritten',
  unassign: 'held resources are left in place',
  take: "its cutover, from then on the module's resources converge (files written, containers replaced)",
  converge: 'the flip: every module taken, the derived filter loaded, the found firewall retired; what the preview marks WILL CLOSE closes',
  adopt: "back to adopted: a retired found firewall is re-enabled, the mesh's derived filter unloaded; modules keep their resources",
};

async function would(admin: ConsoleAdmin, a: Act): Promise<{ would: string; previewId: string }> {
  const network = a.network || DEFAULT_NETWORK;
  const v = await nodeViewOf(admin, network, a.node);
  const n = v.node;
  const where = `(${n.mode}; assigned ${n.assigned.join(', ') || '-'}; taken ${n.taken.join(', ') || '-'})`;
  switch (a.verb) {
    case 'assign':
    case 'take':
    case 'unassign':
      return { would: `${a.verb} module ${a.module ?? '?'} on node ${a.node} ${where}: ${WHAT[a.verb]}`, previewId: '' };
    case 'converge':
      if (!v.preview) return { would: `no preview for ${a.node}: ${v.previewError}`, previewId: '' };
      if (a.previewId && a.previewId !== v.preview.id)
        return { would: `preview ${a.previewId} is stale: ${a.node} now previews ${v.preview.id}; read it first`, previewId: '' };
      return { would: `converge ${a.node} to preview ${v.preview.id} ${where}: ${WHAT.converge} (${v.preview.closes} door(s))`, previewId: v.preview.id };
    case 'adopt':
      return { would: `adopt ${a.node} ${where}: ${WHAT.adopt}`, previewId: '' };
  }
}

async function act(admin: ConsoleAdmin, a: Act): Promise<unknown> {
  const network = a.network || DEFAULT_NETWORK;
  const req = { network, node: a.node, module: a.module ?? '' };
  switch (a.verb) {
    case 'assign':
      return admin('assignModule', req);
    case 'take':
      return admin('takeModule', req);
    case 'unassign':
      return admin('unassignModule', req);
    case 'converge': {
      // Never without the id the page showed: the controller refuses one the machine moved past (and
      // checks it again itself, at the flip); said here first, before what else it would refuse.
      const v = await nodeViewOf(admin, network, a.node);
      if (!a.previewId || (v.preview && v.preview.id !== a.previewId)) {
        throw new MeshpError(
          'MESHP_PREVIEW_STALE',
          `node ${a.node} changed since preview ${a.previewId || '(none shown)'} (it previews ${v.preview?.id ?? 'nothing'} now): preview again, nothing was done`,
        );
      }
      return admin('convergeNode', { network, node: a.node, previewId: a.previewId || 'none-shown', allowClose: [] });
    }
    case 'adopt':
      return admin('setMode', { network, node: a.node, mode: WIRE_MODE.ADOPTED });
  }
}

export function actionRoutes(app: FastifyInstance, handler: AdminHandler): void {
  app.get<{ Querystring: Act }>('/api/would', { schema: { querystring: ACT_SCHEMA } }, async (request, reply) => {
    const admin = sessionAdmin(handler, request, reply);
    if (!admin) return reply;
    return reply.header('cache-control', 'no-store').send(await would(admin, request.query));
  });
  app.post<{ Body: Act }>('/api/act', { schema: { body: ACT_SCHEMA }, onRequest: app.csrfProtection }, async (request, reply) => {
    const admin = sessionAdmin(handler, request, reply);
    if (!admin) return reply;
    if (!mayChange(request)) return refusal(reply, 403, 'MESHP_FORBIDDEN', 'this session may read, not change: sign in with a credential that may');
    await act(admin, request.body);
    return reply.header('cache-control', 'no-store').send({ done: request.body.verb });
  });
}

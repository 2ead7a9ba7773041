/**
 * A store across the network (store-postgres; issue 24): what an admin call reads and writes of
 * the hosting's tables and of the audit log, asked without the event loop waiting on the database.
 * The calls that show a node's last report read it first (`reportsFirst`: the node's, or the
 * network's for a node list), so the call itself answers from memory; a read the store refuses
 * leaves the last reports known here. The token and audit calls are answered by the store's
 * asynchronous methods (`asyncMethods`). A node's rename writes the hosting's tables before the
 * call's change, which commits it (`renameFirst`), and back should the change be refused.
 */
import type { AdminApi, AdminRequest } from '@meshp/protocol';
import type { AuditBook } from '@meshp/core';
import type { Controller } from '../controller.js';
import { NODE_NAME, type Enrolment } from './enrolment.js';
import { tokenToWire } from './readback.js';
import { auditQuery } from './audit.js';
import { tokenRequest } from './token-admin.js';
import { nameTaken, notFound, usage } from '@meshp/core/util';

type AsyncMethod = 'createToken' | 'listEnrolmentTokens' | 'revokeEnrolmentToken' | 'listAudit';
export type AsyncMethods = { [M in AsyncMethod]?: (r: AdminRequest<M>, network: string) => Promise<AdminApi[M]['response']> };

/** The token and audit calls, answered without waiting, when the stores can (else none: admin.ts's own). */
export function asyncMethods(enrolment: Enrolment, audit: AuditBook | null, now: () => number = Date.now): AsyncMethods {
  const out: AsyncMethods = {};
  if (enrolment.asyncTokens) {
    out.createToken = async (r, net) => enrolment.createTokenAsync(tokenRequest(r, net));
    out.listEnrolmentTokens = async (_r, net) => {
      const tokens = await enrolment.listTokensAsync(net);
      const at = now();
      return { tokens: tokens.map((t) => tokenToWire(t, at)) };
    };
    out.revokeEnrolmentToken = async (r, net) => {
      if (!r.id) throw usage('id is required');
      const { token } = await enrolment.revokeTokenAsync(net, r.id.toLowerCase());
      return { token: tokenToWire(token, now()) };
    };
  }
  const list = audit?.listAuditAsync?.bind(audit);
  if (list) out.listAudit = async (r, net) => ({ entries: (await list(auditQuery(r, net))).map((e) => ({ ...e, node: e.node ?? '' })) });
  return out;
}

/** The calls that show a node's last report: the node named in the request, or (null) every node of the network. */
function reportsShown(method: string, request: object): string[] | null | undefined {
  if (method === 'listNodes') return null;
  const node = 'node' in request ? request.node : undefined;
  return typeof node === 'string' && node ? [node] : undefined;
}

/** The reports the call shows, read into memory first (a refusal is passed over: the last known answer). */
export async function reportsFirst(
  load: ((network: string, nodes: string[] | null) => Promise<void>) | undefined,
  method: string,
  request: object,
  network: string,
): Promise<void> {
  const nodes = load ? reportsShown(method, request) : undefined;
  if (nodes === undefined) return;
  await load!(network, nodes).catch(() => undefined);
}

/** The names of a rename as the network may take them; null for a node's own name again. */
export function renameChecks(controller: Controller, r: AdminRequest<'renameNode'>, net: string): { id: string; to: string } | null {
  if (!r.node) throw usage('node is required');
  if (!r.newName) throw usage('newName is required');
  const { node: id, newName: to } = r;
  if (!NODE_NAME.test(to)) throw usage(`node name ${JSON.stringify(to)} is not valid`);
  if (!controller.member(net, id)) throw notFound('node', id, net);
  if (to === id) return null;
  if (controller.member(net, to)) throw nameTaken(to, net);
  return { id, to };
}

/**
 * A rename's hosting tables renamed before the call, without waiting (they must hold the new name
 * before the controller commits it: admin.ts renameNode); answers what renames them back should the
 * call be refused (its checks again, or the controller's commit).
 */
export async function renameFirst(
  controller: Controller,
  rename: ((network: string, from: string, to: string) => Promise<void>) | undefined,
  method: string,
  request: object,
  net: string,
): Promise<(() => Promise<void>) | null> {
  if (method !== 'renameNode' || !rename) return null;
  const names = renameChecks(controller, request as AdminRequest<'renameNode'>, net);
  if (!names) return null;
  await rename(net, names.id, names.to);
  return () => rename(net, names.to, names.id);
}

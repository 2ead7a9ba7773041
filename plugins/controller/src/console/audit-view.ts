/**
 * The console's audit page: the controller's audit log (issue 28), read through the Admin API as
 * `meshp audit` reads it: every change an admin call made, newest last, with its actor, method,
 * node, summary and the state version it left. Changes made from the console are there as the
 * CLI's are (the same Admin calls, the same credential).
 */
import type { ConsoleAdmin } from './admin-call.js';

/** As many as `meshp audit` shows by default. */
export const AUDIT_SHOWN = 100;

export interface AuditView {
  network: string;
  node: string;
  entries: { at: string; actor: string; method: string; node: string; stateVersion: number; summary: string }[];
}

export async function auditViewOf(admin: ConsoleAdmin, network: string, node: string): Promise<AuditView> {
  const r = await admin('listAudit', { network, node, since: '', limit: AUDIT_SHOWN });
  return {
    network,
    node,
    entries: (r.entries ?? []).map((e) => ({
      at: e.at ?? '',
      actor: e.actor ?? '',
      method: e.method ?? '',
      node: e.node ?? '',
      stateVersion: Number(e.stateVersion ?? 0),
      summary: e.summary ?? '',
    })),
  };
}

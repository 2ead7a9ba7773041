/**
 * The console's policy page: the rules in force and the reachability matrix the controller computes
 * from them (getPolicy with withReach: core's reachMatrix, the scope the deltas use), read through the
 * Admin API as `policy get` reads it.
 */
import type { ConsoleAdmin } from './admin-call.js';

export interface PolicyView {
  network: string;
  policyVersion: number;
  stateVersion: number;
  rules: { from: string; to: string; ports: string[] }[];
  tests: { from: string; to: string; port: string; expect: string }[];
  /** Every member, in the matrix's order (rows: who reaches; columns: whom). */
  nodes: string[];
  /** matrix[i][j]: the ports nodes[i] may reach on nodes[j] ('' for none, the node itself too). */
  matrix: string[][];
}

export async function policyViewOf(admin: ConsoleAdmin, network: string): Promise<PolicyView> {
  const p = await admin('getPolicy', { network, withReach: true });
  const reach = p.reach ?? [];
  const nodes = reach.map((r) => r.node ?? '');
  const matrix = reach.map((r) => {
    const to = new Map((r.peers ?? []).map((x) => [x.peer ?? '', (x.ports ?? []).join(', ')]));
    return nodes.map((n) => to.get(n) ?? '');
  });
  return {
    network,
    policyVersion: Number(p.policyVersion ?? 0),
    stateVersion: Number(p.stateVersion ?? 0),
    rules: (p.rules ?? []).map((r) => ({ from: r.fromTag ?? '', to: r.toTag ?? '', ports: [...(r.ports ?? [])] })),
    tests: (p.tests ?? []).map((x) => ({ from: x.from ?? '', to: x.to ?? '', port: x.port ?? '', expect: x.expect ?? '' })),
    nodes,
    matrix,
  };
}

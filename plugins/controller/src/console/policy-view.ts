/**
 * The console's policy page: the rules in force and the reachability matrix the controller computes
 * from them (getPolicy with withReach: core's reachMatrix, the scope the deltas use), read through the
 * Admin API as `policy get` reads it. A matrix of more than MATRIX_MAX nodes on a side is not drawn,
 * nor computed: the page asks for a filter (a tag or a node's name, for the rows and for the
 * columns), and the controller computes only the pairs the filter keeps.
 */
import type { ConsoleAdmin } from './admin-call.js';

/** The most nodes a side of the drawn matrix may have (a page of 200 × 200 cells is still read). */
export const MATRIX_MAX = 200;

export interface ReachFilter {
  /** A node's name or a tag: the rows (who reaches); empty: every member. */
  from?: string;
  /** The same, for the columns (whom). */
  to?: string;
}

export interface PolicyView {
  network: string;
  policyVersion: number;
  stateVersion: number;
  rules: { from: string; to: string; ports: string[] }[];
  tests: { from: string; to: string; port: string; expect: string }[];
  /** The filter the matrix was asked with ('' for every member). */
  from: string;
  to: string;
  /** The bound on a side (MATRIX_MAX). */
  max: number;
  /** The side over the bound, when it is (no matrix then); 0 when the matrix is drawn. */
  omittedOf: number;
  /** The matrix's rows (who reaches) and columns (whom), by name. */
  nodes: string[];
  columns: string[];
  /** matrix[i][j]: the ports nodes[i] may reach on columns[j] ('' for none, the node itself too). */
  matrix: string[][];
}

export async function policyViewOf(admin: ConsoleAdmin, network: string, filter: ReachFilter = {}): Promise<PolicyView> {
  const from = filter.from?.trim() ?? '';
  const to = filter.to?.trim() ?? '';
  const p = await admin('getPolicy', { network, withReach: true, reachFrom: from, reachTo: to, reachMax: MATRIX_MAX });
  const reach = p.reach ?? [];
  const nodes = reach.map((r) => r.node ?? '');
  const columns = [...(p.reachColumns ?? [])];
  const matrix = reach.map((r) => {
    const peers = new Map((r.peers ?? []).map((x) => [x.peer ?? '', (x.ports ?? []).join(', ')]));
    return columns.map((n) => peers.get(n) ?? '');
  });
  return {
    network,
    policyVersion: Number(p.policyVersion ?? 0),
    stateVersion: Number(p.stateVersion ?? 0),
    rules: (p.rules ?? []).map((r) => ({ from: r.fromTag ?? '', to: r.toTag ?? '', ports: [...(r.ports ?? [])] })),
    tests: (p.tests ?? []).map((x) => ({ from: x.from ?? '', to: x.to ?? '', port: x.port ?? '', expect: x.expect ?? '' })),
    from,
    to,
    max: MATRIX_MAX,
    omittedOf: p.reachOmittedOf ?? 0,
    nodes,
    columns,
    matrix,
  };
}

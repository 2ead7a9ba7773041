/**
 * The reachability matrix of a policy (issue 30's policy page): for every member, each peer it may
 * reach and on which ports, from the same rules and scope the deltas use (policy-reach.ts
 * reachPorts, PolicyIndex.scope). The mesh's own rule, every member reaching the control-node's
 * foundation ports, is the same under every policy and is said as `foundation`.
 */
import { PolicyIndex, SCOPE, isControlNode } from './policy.js';
import { reachPorts, type PeerReach } from './policy-reach.js';
import type { MemberRecord, PolicyRule } from './records.js';

/** What a member may reach of the control-node whatever the policy says. */
export const FOUNDATION_REACH = 'foundation';

export interface NodeReach {
  node: string;
  /** The peers it may reach, by name, each with its ports; a peer it may not reach is left out. */
  peers: PeerReach[];
}

const byName = (list: readonly MemberRecord[]) => [...list].sort((a, b) => a.id.localeCompare(b.id));

/**
 * Per member (by name), every peer it may reach and on which ports; `to`, when given, the only peers
 * looked at (the columns of a filtered matrix). rows × columns pairs: asked only by the console's
 * policy page, which bounds both (policy-methods.ts reach_max).
 */
export function reachMatrix(members: readonly MemberRecord[], rules: readonly PolicyRule[], to: readonly MemberRecord[] = members): NodeReach[] {
  const policy = new PolicyIndex(rules);
  const columns = byName(to);
  return byName(members).map((a) => ({
    node: a.id,
    peers: columns.flatMap((b) => {
      if (a.id === b.id || policy.scope(a, b) !== SCOPE.REACH) return [];
      const ports = reachPorts(policy, a.tags, b.tags);
      const all = isControlNode(b.tags) ? [...ports, FOUNDATION_REACH] : ports;
      return all.length ? [{ peer: b.id, ports: all }] : [];
    }),
  }));
}

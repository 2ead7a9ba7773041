/**
 * What a policy lets each node reach, and what a new policy changes of it (issue 28's reachability
 * diff): per node, the peers that enter and leave its view (PolicyIndex.scope, the scope the deltas
 * are computed with) and the ports it may reach on each peer (the rules from its tags to the peer's,
 * as filterFor gives the peer's filter). The mesh's own rule (every member reaches the control-node's
 * foundation ports) is the same under every policy and so never part of a diff.
 */
import { protoCanonicalJson, sha256Hex } from '../canonical.js';
import { PolicyIndex, SCOPE } from './policy.js';
import type { MemberRecord, PolicyRule } from './records.js';

/** Every port and protocol: a rule without ports. */
export const ALL_PORTS = '*';

/** What `node` may reach of `peer` under a rule set: `80/tcp`, `8000-8100/udp`, or `*`. */
export interface PeerReach {
  peer: string;
  ports: string[];
}

export interface NodeReachChange {
  node: string;
  peersGained: string[];
  peersLost: string[];
  portsGained: PeerReach[];
  portsLost: PeerReach[];
}

/** A rule's ports, one entry per protocol ("80" is 80/tcp and 80/udp); none: every port. */
function portEntries(r: PolicyRule): string[] {
  if (!r.ports?.length) return [ALL_PORTS];
  return r.ports.flatMap((p) => (p.includes('/') ? [p] : [`${p}/tcp`, `${p}/udp`]));
}

/** The ports the holder of `from` may reach on the holder of `to`, sorted; `*` alone when a rule allows every port. */
export function reachPorts(policy: PolicyIndex, from: readonly string[], to: readonly string[]): string[] {
  const tags = new Set(from);
  const out = new Set<string>();
  for (const r of policy.inboundRules(to)) if (tags.has(r.from)) for (const p of portEntries(r)) out.add(p);
  return out.has(ALL_PORTS) ? [ALL_PORTS] : [...out].sort();
}

/** Ports in `a` and not in `b`; what is left of every port but `b` is said in those words. */
function minus(a: string[], b: string[]): string[] {
  if (a[0] === ALL_PORTS) return b[0] === ALL_PORTS ? [] : [b.length ? `${ALL_PORTS} but ${b.join(',')}` : ALL_PORTS];
  if (b[0] === ALL_PORTS) return [];
  const s = new Set(b);
  return a.filter((p) => !s.has(p));
}

/** The rules in one list and not the other (as scope.ts changedRules: a rule whose ports changed is in both). */
function changed(before: readonly PolicyRule[], after: readonly PolicyRule[]): PolicyRule[] {
  const key = (r: PolicyRule) => JSON.stringify([r.from, r.to, r.ports ?? []]);
  const a = new Set(before.map(key));
  const b = new Set(after.map(key));
  return [...before.filter((r) => !b.has(key(r))), ...after.filter((r) => !a.has(key(r)))];
}

/**
 * The pairs of members whose reach the change may move: the holders of a changed rule's `from` and
 * `to` tags, both ways (a rule puts a peer in the view of both ends). Not every pair of the network.
 */
function candidatePairs(members: readonly MemberRecord[], rules: PolicyRule[]): [MemberRecord, MemberRecord][] {
  const byTag = new Map<string, MemberRecord[]>();
  for (const m of members) for (const t of m.tags) byTag.set(t, [...(byTag.get(t) ?? []), m]);
  const seen = new Set<string>();
  const out: [MemberRecord, MemberRecord][] = [];
  for (const r of rules) {
    for (const a of byTag.get(r.from) ?? []) {
      for (const b of byTag.get(r.to) ?? []) {
        for (const [x, y] of [
          [a, b],
          [b, a],
        ] as const) {
          const k = JSON.stringify([x.id, y.id]);
          if (x.id === y.id || seen.has(k)) continue;
          seen.add(k);
          out.push([x, y]);
        }
      }
    }
  }
  return out;
}

/** One side of a diff: the members (their tags) and the rules in force over them. */
interface Side {
  policy: PolicyIndex;
  member: (id: string) => MemberRecord;
}

/**
 * Per node, what moving from `then` to `now` changes of its reach over the pairs given (a node and a
 * peer, by name, each a member on both sides); nodes with no change are left out. The one diff both
 * a policy change (the rules move) and a tags change (one member's tags move) are read through.
 */
function diffOver(pairs: Iterable<[string, string]>, then: Side, now: Side): NodeReachChange[] {
  const byNode = new Map<string, NodeReachChange>();
  const of = (id: string) => {
    let c = byNode.get(id);
    if (!c) byNode.set(id, (c = { node: id, peersGained: [], peersLost: [], portsGained: [], portsLost: [] }));
    return c;
  };
  for (const [x, y] of pairs) {
    const [a0, b0, a1, b1] = [then.member(x), then.member(y), now.member(x), now.member(y)];
    const was = then.policy.scope(a0, b0) !== SCOPE.NONE;
    const is = now.policy.scope(a1, b1) !== SCOPE.NONE;
    if (was !== is) (is ? of(x).peersGained : of(x).peersLost).push(y);
    const p0 = reachPorts(then.policy, a0.tags, b0.tags);
    const p1 = reachPorts(now.policy, a1.tags, b1.tags);
    const gained = minus(p1, p0);
    const lost = minus(p0, p1);
    if (gained.length) of(x).portsGained.push({ peer: y, ports: gained });
    if (lost.length) of(x).portsLost.push({ peer: y, ports: lost });
  }
  const byPeer = (p: PeerReach, q: PeerReach) => p.peer.localeCompare(q.peer);
  return [...byNode.values()]
    .map((c) => ({
      ...c,
      peersGained: c.peersGained.sort(),
      peersLost: c.peersLost.sort(),
      portsGained: c.portsGained.sort(byPeer),
      portsLost: c.portsLost.sort(byPeer),
    }))
    .sort((p, q) => p.node.localeCompare(q.node));
}

/** Per node, what the policy `after` changes of its reach under `before`; nodes with no change are left out. */
export function reachDiff(members: readonly MemberRecord[], before: readonly PolicyRule[], after: readonly PolicyRule[]): NodeReachChange[] {
  const byId = new Map(members.map((m) => [m.id, m]));
  const member = (id: string) => byId.get(id)!;
  const pairs = candidatePairs(members, changed(before, after)).map(([a, b]): [string, string] => [a.id, b.id]);
  return diffOver(pairs, { policy: new PolicyIndex(before), member }, { policy: new PolicyIndex(after), member });
}

/**
 * Per node, what giving `node` the tags `tags` changes of its reach under the same rules (`meshp node
 * tag`): only the pairs `node` is an end of can move, both ways (its view of each peer, each peer's of
 * it); nodes with no change are left out. `node` must be one of `members`.
 */
export function tagsReachDiff(members: readonly MemberRecord[], rules: readonly PolicyRule[], node: string, tags: readonly string[]): NodeReachChange[] {
  const byId = new Map(members.map((m) => [m.id, m]));
  const was = byId.get(node);
  if (!was) return [];
  const retagged: MemberRecord = { ...was, tags: [...tags] };
  const policy = new PolicyIndex(rules);
  const pairs = members
    .filter((m) => m.id !== node)
    .flatMap((m): [string, string][] => [
      [node, m.id],
      [m.id, node],
    ]);
  return diffOver(pairs, { policy, member: (id) => byId.get(id)! }, { policy, member: (id) => (id === node ? retagged : byId.get(id)!) });
}

/** The membership a diff reads (each member's name and tags, sorted): what scope reads of it. */
function membershipOf(members: readonly MemberRecord[]): unknown[] {
  return members.map((m) => [m.id, [...m.tags].sort()]).sort((x, y) => String(x[0]).localeCompare(String(y[0])));
}

/**
 * The id of a policy preview: the network, the policy in force, the one proposed (its tests too) and
 * the membership the diff was computed over (each member's name and tags: what scope reads). Any of
 * them moving gives another id, so `policy set --preview-id` applies exactly what was shown.
 */
export function policyPreviewId(
  network: string,
  before: readonly PolicyRule[],
  after: readonly PolicyRule[],
  tests: readonly unknown[],
  members: readonly MemberRecord[],
): string {
  return sha256Hex(protoCanonicalJson({ network, before, after, tests, membership: membershipOf(members) })).slice(0, 16);
}

/**
 * The id of a tags preview: the network, the policy in force, the membership (every member's tags,
 * the node's own among them) and the node's proposed tags. The policy, a join, a leave or any tags
 * moving gives another id, so `node tag --preview-id` applies exactly what was shown. Told apart from
 * a policy preview's id by its kind.
 */
export function tagsPreviewId(network: string, rules: readonly PolicyRule[], members: readonly MemberRecord[], node: string, tags: readonly string[]): string {
  return sha256Hex(protoCanonicalJson({ kind: 'tags', network, rules, membership: membershipOf(members), node, tags: [...tags].sort() })).slice(0, 16);
}

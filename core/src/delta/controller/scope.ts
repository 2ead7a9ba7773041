/**
 * Who a change concerns, from the change log and the indexes (tag → members, policy by tag both
 * ways), without looking at every node: the fan-out pumps those streams only, so a change that
 * concerns k nodes costs O(k), whatever the size of the network. A superset is safe (a node whose
 * view did not change is sent nothing); a node left out would miss its delta until its next one, so
 * what cannot be bounded cheaply answers null: everyone.
 */
import type { NetworkState } from './network.js';
import { isControlNode } from './policy.js';
import { mayUse, routeOfTag, routeTag, type StoredRouteGroup } from './routes.js';
import type { LogEntry, MemberRecord, PolicyRule } from './records.js';
import type { RouteGroups as WireRouteGroups } from '../../contract/wire.js';

type RouteGroups = WireRouteGroups & { primaries?: Record<string, string> };

/** The members whose view the entries may have changed; null: any of them. */
export function affectedBy(net: NetworkState, entries: readonly LogEntry[]): Set<string> | null {
  const out = new Set<string>();
  const holders = (tags: Iterable<string>) => {
    for (const t of tags) for (const id of net.tags.members(t)) out.add(id);
  };
  /** Everyone who sees (or saw) this member, under the policy now: the holders of the tags that reach it or that it reaches. */
  const groups = net.record.components.routeGroups?.groups ?? [];
  const watchers = (m: MemberRecord) => {
    holders(net.policy.reachTags(m.tags));
    holders(net.policy.reachedByTags(m.tags));
    // Through the route groups (routes.ts): the via nodes of the groups it may use, the users of those it serves.
    for (const g of groups) {
      if (mayUse(m, g, net.policy)) for (const v of g.viaPeers) out.add(v);
      if (g.viaPeers.includes(m.id)) holders(net.policy.reachedByTags([routeTag(g.name)]));
    }
  };
  for (const e of entries) {
    switch (e.kind) {
      case 'member':
      case 'members': {
        const changes = e.kind === 'member' ? [e] : e.changes;
        for (const c of changes) {
          // Every member sees a control-node (policy.ts: CONTROL_NODE_TAG): a change of one concerns everyone.
          if ((c.before && isControlNode(c.before.tags)) || (c.after && isControlNode(c.after.tags))) return null;
          out.add(c.id);
          if (c.before) watchers(c.before);
          if (c.after) watchers(c.after);
          // A removal is also told to the nodes that may hold the peer in a tunnel grace after an
          // unscoping (SyncRecord.graced), found through the index of who holds whom (network.ts SyncRecords).
          else for (const id of net.sync.holdersOf(c.id)) out.add(id);
        }
        break;
      }
      case 'policy':
        for (const r of changedRules(e.before, e.after)) {
          holders([r.from, r.to]);
          const g = routeOfTag(r.to);
          if (g !== null) for (const v of groups.find((x) => x.name === g)?.viaPeers ?? []) out.add(v);
        }
        break;
      case 'module':
        for (const m of net.members.values()) if (m.assigned.includes(e.name)) out.add(m.id);
        break;
      case 'component':
        // Route groups are sent per node (routes.ts): a group that changed (added, removed, its
        // prefixes, via nodes or primary) concerns its via nodes and its users, before and after.
        if (e.name === 'routeGroups') {
          for (const name of changedGroups(e.before as RouteGroups | null, e.after as RouteGroups | null)) {
            holders(net.policy.reachedByTags([routeTag(name.group)]));
            for (const v of name.via) out.add(v);
          }
          break;
        }
        // A shared component (dns, relays) is in every view.
        return null;
      default:
        return null;
    }
  }
  return out;
}

/** The groups that differ between two values of the component, each with its via nodes of both. */
function changedGroups(before: RouteGroups | null, after: RouteGroups | null): { group: string; via: string[] }[] {
  const of = (v: RouteGroups | null) =>
    new Map(
      (v?.groups ?? []).map((g) => [
        g.name,
        {
          key: JSON.stringify([g.prefixes, g.viaPeers, v?.primaries?.[g.name] ?? '', g.noMasquerade === true, (g as StoredRouteGroup).exitUsers ?? []]),
          via: g.viaPeers,
        },
      ]),
    );
  const a = of(before);
  const b = of(after);
  const out: { group: string; via: string[] }[] = [];
  for (const name of new Set([...a.keys(), ...b.keys()]))
    if (a.get(name)?.key !== b.get(name)?.key) out.push({ group: name, via: [...(a.get(name)?.via ?? []), ...(b.get(name)?.via ?? [])] });
  return out;
}

/** The rules in one list and not the other (a rule whose ports changed is in both differences). */
function changedRules(before: readonly PolicyRule[], after: readonly PolicyRule[]): PolicyRule[] {
  const key = (r: PolicyRule) => JSON.stringify([r.from, r.to, r.ports ?? []]);
  const a = new Set(before.map(key));
  const b = new Set(after.map(key));
  return [...before.filter((r) => !b.has(key(r))), ...after.filter((r) => !a.has(key(r)))];
}

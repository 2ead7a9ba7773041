/**
 * What real agents hold of a policy (issue 28's previews read back from the agents, not from the
 * controller's intent): per agent, the peers in its view, and per peer in it the ports that peer may
 * reach on it — its filter's rules read with the peer's tags as the agent holds them (its view).
 */
import type { Filter, Peer } from '@meshp/core';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { nodes, waitUntil, type AgentProc, type ControllerProc } from './grpc-procs.js';

export interface HeldViews {
  /** agent → the peers in its view, sorted. */
  peers: Record<string, string[]>;
  /** `peer->agent` → the ports the peer may reach on the agent (`80/tcp`, `*`), sorted. */
  reach: Record<string, string[]>;
  /** agent → peer → the peer's tags as the agent holds them. */
  tags: Record<string, Record<string, string[]>>;
}

export async function heldViews(agents: AgentProc[]): Promise<HeldViews> {
  const out: HeldViews = { peers: {}, reach: {}, tags: {} };
  for (const a of agents) {
    const store = new SqliteHostStore(a.state);
    try {
      const view = await store.loadView();
      const list = (view?.upsertPeers ?? []) as Peer[];
      out.peers[a.name] = list.map((p) => p.id).sort();
      out.tags[a.name] = Object.fromEntries(list.map((p) => [p.id, [...p.tags].sort()]));
      const rules = ((view as { filter?: Filter } | null)?.filter?.rules ?? []) as Filter['rules'];
      for (const peer of list) {
        const ports = new Set<string>();
        for (const r of rules) {
          if (!r.sourceTags.some((x) => peer.tags.includes(x))) continue;
          if (!r.ports.length) ports.add('*');
          for (const p of r.ports) for (const e of p.includes('/') ? [p] : [`${p}/tcp`, `${p}/udp`]) ports.add(e);
        }
        if (ports.size) out.reach[`${peer.id}->${a.name}`] = ports.has('*') ? ['*'] : [...ports].sort();
      }
    } finally {
      await store.close();
    }
  }
  return out;
}

/**
 * Every one of `count` nodes at gap 0 (it applied every version that changes its view: lazy fan-out
 * leaves a node a change does not concern at the version it applied), the network at `version` or
 * past it; answers the network's version.
 */
export async function settled(ctl: ControllerProc, count: number, version = 1): Promise<number> {
  const ns = await waitUntil(
    `the ${count} nodes at gap 0`,
    async () => {
      const ns = await nodes(ctl);
      return ns.length === count && ns.every((n) => n.gap === 0 && n.appliedVersion > 0 && n.stateVersion >= version) && ns;
    },
    60_000,
  );
  return Math.max(...ns.map((n) => n.stateVersion));
}

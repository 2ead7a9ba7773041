/**
 * The agent's view on disk, written in the size of the change: a store that keeps it per peer
 * (`HostStateStore.saveView`, state-sqlite) gets the peers a delta upserted or took away and the
 * components it changed, in one transaction with the agent's other records; a store without it
 * gets the whole view under VIEW_KEY, as before. A one-peer delta then costs the same at 1k peers
 * as at 50k (bench/agent-persist.bench.mjs).
 */
import type { HostStateStore, ViewWrite } from '../contract/providers.js';
import type { ViewChange } from '../contract/plan.js';
import type { AgentView } from '../delta/agent/view.js';
import { COMPONENT_NAMES, type StateDelta } from '../contract/wire.js';

export const VIEW_KEY = 'agent.view';

/**
 * Persists the view after a delta. `change` null: the whole view (a snapshot, or a view the store
 * does not hold per peer yet). `values`: other records written with it (null deletes).
 */
export async function persistView(store: HostStateStore, view: AgentView, change: ViewChange | null, values: Record<string, unknown> = {}): Promise<void> {
  if (!store.saveView) {
    await store.setValue(VIEW_KEY, view.toSnapshot());
    for (const [k, v] of Object.entries(values)) await store.setValue(k, v);
    return;
  }
  const full = change === null;
  const ids = full ? [...view.peers.keys()] : change.upserted;
  const upsert = ids.flatMap((id) => {
    const p = view.peer(id);
    return p ? [p] : [];
  });
  const names = full ? [...COMPONENT_NAMES] : change.components;
  const components: Record<string, unknown> = {};
  for (const n of names) components[n] = view.components[n as keyof typeof view.components] ?? null;
  const write: ViewWrite = {
    network: view.network,
    version: view.version,
    full,
    upsert,
    remove: full ? [] : [...change.removed, ...change.unscoped],
    components,
    // A whole view kept per peer: the older single record goes.
    values: full ? { ...values, [VIEW_KEY]: null } : values,
  };
  await store.saveView(write);
}

/** The view as stored: per peer when the store keeps it so (`perPeer`), else the single record, else none. */
export async function loadView(store: HostStateStore): Promise<{ snapshot: StateDelta | null; perPeer: boolean }> {
  const rows = store.loadView ? await store.loadView() : null;
  if (rows) return { snapshot: rows, perPeer: true };
  return { snapshot: await store.getValue<StateDelta>(VIEW_KEY), perPeer: false };
}

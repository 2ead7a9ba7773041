/**
 * What the console's pages show, read through the Admin API: the fleet of a network (each node's
 * row and the migration's progress, adopted vs converged) and one node (its resources, its last
 * deltas, and its converge preview as the rows the CLI prints). Plain JSON for the page's script.
 */
import { WIRE_MODE } from '@meshp/core/delta';
import { PREVIEW_COLUMNS, previewRows, type ConvergePreview } from '@meshp/core/lifecycle';
import type { AdminAnswer } from '@meshp/protocol';
import type { ConsoleAdmin } from './admin-call.js';

type WireNode = NonNullable<AdminAnswer<'showNode'>['node']>;

const modeName = (m: number | undefined): string => (m === WIRE_MODE.ADOPTED ? 'adopted' : m === WIRE_MODE.CONVERGED ? 'converged' : 'unknown');

export interface FleetRow {
  name: string;
  mode: string;
  requestedMode: string;
  transition: string;
  status: string;
  statusDetail: string;
  appliedVersion: number;
  stateVersion: number;
  gap: number;
  connected: boolean;
  lastSeen: string;
  lastContact: string;
  firewall: string;
  held: number;
  changed: number;
  refused: number;
  tags: string[];
  assigned: string[];
  taken: string[];
}

export interface Fleet {
  network: string;
  networks: string[];
  nodes: FleetRow[];
  /** The migration's progress: nodes by the mode their agents report. */
  progress: { total: number; adopted: number; converged: number; unknown: number };
}

function row(n: WireNode): FleetRow {
  return {
    name: n.name ?? '',
    mode: modeName(n.mode),
    requestedMode: modeName(n.requestedMode),
    transition: n.transition?.state ?? 'none',
    status: n.status || 'pending',
    statusDetail: n.statusDetail ?? '',
    appliedVersion: n.appliedVersion ?? 0,
    stateVersion: n.stateVersion ?? 0,
    gap: n.gap ?? 0,
    connected: n.connected ?? false,
    lastSeen: n.lastSeen ?? '',
    lastContact: n.connected ? 'now' : n.lastContact || n.lastSeen || 'never',
    firewall: n.firewallKind ?? '',
    held: n.held ?? 0,
    changed: n.changed ?? 0,
    refused: n.refusedResources ?? 0,
    tags: (n.tags ?? []).filter((t): t is string => typeof t === 'string'),
    assigned: (n.assignedModules ?? []).filter((t): t is string => typeof t === 'string'),
    taken: (n.takenModules ?? []).filter((t): t is string => typeof t === 'string'),
  };
}

/** Nodes asked for a page at a time, as `node list` does: a large network's list is over one message's limit. */
const PAGE = 500;

export async function fleetOf(admin: ConsoleAdmin, network: string): Promise<Fleet> {
  const networks = ((await admin('listNetworks', {})).networks ?? []).map((n) => n.name ?? '').filter(Boolean);
  const nodes: FleetRow[] = [];
  let pageToken = '';
  do {
    const r = await admin('listNodes', { network, pageSize: PAGE, pageToken });
    nodes.push(...(r.nodes ?? []).map((n) => row(n as WireNode)));
    pageToken = r.nextPageToken ?? '';
  } while (pageToken);
  const count = (m: string) => nodes.filter((n) => n.mode === m).length;
  return { network, networks, nodes, progress: { total: nodes.length, adopted: count('adopted'), converged: count('converged'), unknown: count('unknown') } };
}

export interface NodeView {
  network: string;
  node: FleetRow;
  firewall: { kind: string; active: boolean; tables: string[]; configFile: string } | null;
  reportedAt: string;
  resources: { key: string; kind: string; module: string; state: string; reason: string }[];
  /** The last deltas sent, each with whether the node's ack has reached it (its applied version is at or past the delta's). */
  recentDeltas: { fromVersion: number; toVersion: number; upserts: number; removals: number; components: string[]; at: string; acked: boolean }[];
  /** The converge preview the controller computes from the node's last report; null with the reason when it cannot. */
  preview: { id: string; columns: readonly string[]; rows: string[][]; closes: number; steps: string[] } | null;
  previewError: string;
  /** The network's catalogue, by name: what may be assigned. */
  catalogue: string[];
}

async function previewFor(admin: ConsoleAdmin, network: string, node: string): Promise<Pick<NodeView, 'preview' | 'previewError'>> {
  try {
    const p = (await admin('previewConverge', { network, node })).preview as ConvergePreview | undefined;
    if (!p) return { preview: null, previewError: 'no preview' };
    const rows = previewRows(p);
    const closes = rows.filter((r) => r.at(-1)?.startsWith('WILL CLOSE')).length;
    return { preview: { id: p.id, columns: PREVIEW_COLUMNS, rows, closes, steps: p.steps ?? [] }, previewError: '' };
  } catch (e) {
    // A node that has not reported yet has no preview: the page says why, as the CLI would.
    return { preview: null, previewError: e instanceof Error ? e.message : String(e) };
  }
}

export async function nodeViewOf(admin: ConsoleAdmin, network: string, name: string): Promise<NodeView> {
  const s = await admin('showNode', { network, node: name });
  const fw = s.firewall;
  return {
    network,
    node: row(s.node as WireNode),
    firewall: fw ? { kind: fw.kind || 'none', active: fw.active ?? false, tables: (fw.tables ?? []) as string[], configFile: fw.configFile ?? '' } : null,
    reportedAt: s.reportedAt ?? '',
    resources: (s.resources ?? []).map((x) => ({ key: x.key ?? '', kind: x.kind ?? '', module: x.module ?? '', state: x.state ?? '', reason: x.reason ?? '' })),
    recentDeltas: (s.recentDeltas ?? []).map((d) => ({
      fromVersion: d.fromVersion ?? 0,
      toVersion: d.toVersion ?? 0,
      upserts: d.upserts ?? 0,
      removals: d.removals ?? 0,
      components: (d.components ?? []).filter((c): c is string => typeof c === 'string'),
      at: d.at ?? '',
      // Only an ack whose hash matched moves the applied version (ADR 0001).
      acked: (s.node?.appliedVersion ?? 0) >= (d.toVersion ?? 0),
    })),
    ...(await previewFor(admin, network, name)),
    catalogue: ((await admin('listCatalogue', { network })).modules ?? []).map((m) => m.name ?? '').filter(Boolean),
  };
}

/**
 * `meshp node converge` and `meshp node adopt`: the controller previews from the node's last report
 * and records the flip (or the return); the agent does it on the machine and reports each step,
 * which this prints as it arrives, until the node says converged, adopted, or refused.
 */
import type { ConvergePreview, PreviewItem } from '@meshp/core';
import type { AdminClient } from '@meshp/transport-grpc';
import { renderPreview } from '../host/converge.js';
import { Refusal, confirmChange, printJson } from '../output.js';
import { withAdmin, type RemoteArgs } from './admin.js';
import { modeShown, nodeJson, type WireLifecycle, type WireNodeStatus } from './render.js';

export interface LifecycleArgs extends RemoteArgs {
  node: string;
  json: boolean;
  timeout: number;
}

interface WirePreview {
  id: string;
  node: string;
  firewall?: { kind: string; active: boolean; tables: string[]; configFile: string };
  items: { source: string; protocol: string; port: number; address: string; holder: string; declaredBy: string; after: string; from: string[]; now?: string; nowFrom?: string[]; mentioned?: boolean }[];
  take: string[];
  steps: string[];
}

const KNOWN_NOW = new Set(['open', 'open-from', 'closed']);

/** A controller that does not say where a door is reachable now (an older one) gives `unknown`. */
function nowFromWire(i: WirePreview['items'][number]): Pick<PreviewItem, 'now' | 'nowFrom' | 'mentioned'> {
  if (i.now === 'local') return { now: 'local' };
  if (!i.now || !KNOWN_NOW.has(i.now)) return { now: 'unknown' };
  return { now: i.now as PreviewItem['now'], ...(i.now === 'open-from' ? { nowFrom: [...(i.nowFrom ?? [])] } : {}), mentioned: i.mentioned ?? false };
}

export function previewFromWire(p: WirePreview): ConvergePreview {
  const fw = p.firewall ?? { kind: 'none', active: false, tables: [], configFile: '' };
  return {
    id: p.id, node: p.node, take: [...p.take], steps: [...p.steps],
    firewall: { kind: fw.kind, active: fw.active, tables: [...fw.tables], ...(fw.configFile ? { configFile: fw.configFile } : {}) },
    items: p.items.map((i) => ({
      source: i.source as 'socket' | 'published', protocol: i.protocol as 'tcp' | 'udp', port: i.port, address: i.address, holder: i.holder,
      declaredBy: i.declaredBy || null, after: i.after as 'open' | 'closes' | 'local', ...(i.from.length ? { from: [...i.from] } : {}),
      ...nowFromWire(i),
    })),
  };
}

function header(node: WireNodeStatus): string {
  return node.mode === 1 ? `node ${node.name} is ADOPTED: its found firewall is in force` : `node ${node.name} is ${modeShown(node.mode)}`;
}

const out = (a: { json: boolean }, line: string) => {
  if (!a.json) process.stdout.write(`${line}\n`);
};

/** Polls the node until `done` says the outcome arrived; prints each new step of the lifecycle. */
async function follow(c: AdminClient, network: string, a: LifecycleArgs, done: (n: WireNodeStatus) => boolean): Promise<{ node: WireNodeStatus; steps: string[] }> {
  const deadline = Date.now() + a.timeout * 1000;
  let printed = 0;
  let last: WireNodeStatus | null = null;
  for (;;) {
    const node = (await c.call('showNode', { network, node: a.node })).node as unknown as WireNodeStatus;
    last = node;
    const l = node.lifecycle;
    const finished = done(node);
    if (l && (finished || l.state === 'flipping' || l.state === 'returning')) {
      for (const s of l.steps.slice(printed)) out(a, `-> ${s}`);
      printed = Math.max(printed, l.steps.length);
    }
    if (finished) return { node, steps: l?.steps ?? [] };
    if (Date.now() > deadline) {
      throw new Refusal(`MESHP_TIMEOUT: node ${a.node} did not report the outcome within ${a.timeout} s (last: ${last.lifecycle?.state || 'nothing'}, reported version ${last.reportedVersionWide || last.reportedVersion || 0}); see meshp node show ${a.node}`);
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

function refusedLine(l: WireLifecycle): Refusal {
  return new Refusal(`${l.code || 'MESHP_REFUSED'}: ${l.message || 'the node refused'}`);
}

/** `meshp node converge NODE --preview | --yes [--preview-id ID]`. */
export async function nodeConverge(a: LifecycleArgs & { preview: boolean; yes: boolean; previewId?: string }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    if (a.preview || !a.yes) {
      const r = await c.call('previewConverge', { network, node: a.node });
      const node = r.node as unknown as WireNodeStatus;
      const preview = previewFromWire(r.preview as unknown as WirePreview);
      if (a.preview && a.json) return printJson({ node: nodeJson(node), preview });
      out(a, `${header(node)}\n${renderPreview(preview)}`);
      if (a.preview) return out(a, `(preview: nothing changed; flip with meshp node converge ${a.node} --yes --preview-id ${preview.id})`);
      await confirmChange(false, `Converge ${a.node} to preview ${preview.id}?`, 'pass --yes (and --preview-id) to flip');
      a.previewId ??= preview.id;
    }
    const r = await c.call('convergeNode', { network, node: a.node, previewId: a.previewId ?? '' });
    const recorded = r.node as unknown as WireNodeStatus;
    const preview = previewFromWire(r.preview as unknown as WirePreview);
    if (!a.preview && a.yes && !a.json) out(a, `${header(recorded)}\n${renderPreview(preview)}`);
    out(a, `recorded: ${a.node} converges to preview ${preview.id} (state version ${recorded.stateVersion}); the node flips:`);
    const { node, steps } = await follow(c, network, a, (n) => {
      const l = n.lifecycle;
      return !!l && (n.reportedVersionWide || n.reportedVersion || 0) >= recorded.stateVersion && l.previewId === preview.id && (l.state === 'converged' || l.state === 'refused');
    });
    if (a.json) printJson({ node: nodeJson(node), preview, steps, lifecycle: node.lifecycle });
    if (node.lifecycle!.state === 'refused') throw refusedLine(node.lifecycle!);
    out(a, `node ${a.node} converged (preview ${preview.id})`);
  });
}

/** `meshp node adopt NODE`: back to adopted; a converged node re-enables the found firewall it retired. */
export async function nodeAdopt(a: LifecycleArgs): Promise<void> {
  await withAdmin(a, async (c, network) => {
    const r = await c.call('setMode', { network, node: a.node, mode: 1 });
    const recorded = r.node as unknown as WireNodeStatus;
    out(a, `recorded: ${a.node} is ADOPTED (state version ${recorded.stateVersion}); the node returns:`);
    const { node, steps } = await follow(c, network, a, (n) => {
      const l = n.lifecycle;
      return !!l && (n.reportedVersionWide || n.reportedVersion || 0) >= recorded.stateVersion && (l.state === 'adopted' || l.state === 'refused');
    });
    if (a.json) printJson({ node: nodeJson(node), steps, lifecycle: node.lifecycle });
    if (node.lifecycle!.state === 'refused') throw refusedLine(node.lifecycle!);
    out(a, `node ${a.node} is ADOPTED: its found firewall is in force`);
  });
}

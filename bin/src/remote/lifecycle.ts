/**
 * `meshp node converge` and `meshp node adopt`: the controller previews from the node's last report
 * and records the flip (or the return); the agent does it on the machine and reports each step,
 * which this prints as it arrives, until the node says converged, adopted, or refused.
 */
import { WIRE_MODE } from '@meshp/core/delta';
import type { ConvergePreview, PreviewItem } from '@meshp/core/lifecycle';
import type { AdminClient, wire } from '@meshp/transport-grpc';
import { renderPreview } from '../host/converge-render.js';
import { Refusal, confirmChange, printJson } from '../output.js';
import { oneOf, present, withAdmin, type RemoteArgs } from './admin.js';
import { modeName, nodeJson, type WireNodeStatus } from './render.js';

export interface LifecycleArgs extends RemoteArgs {
  node: string;
  json: boolean;
  timeout: number;
}

type WirePreview = wire.ConvergePreview;

const KNOWN_NOW = ['open', 'open-from', 'closed'] as const;

/** A controller that does not say where a door is reachable now (an older one) gives `unknown`. */
function nowFromWire(i: WirePreview['items'][number]): Pick<PreviewItem, 'now' | 'nowFrom' | 'mentioned'> {
  if (i.now === 'local') return { now: 'local' };
  const now = KNOWN_NOW.find((w) => w === i.now);
  if (!now) return { now: 'unknown' };
  return { now, ...(now === 'open-from' ? { nowFrom: [...(i.nowFrom ?? [])] } : {}), mentioned: i.mentioned ?? false };
}

export function previewFromWire(p: WirePreview): ConvergePreview {
  const fw = p.firewall ?? { kind: 'none', active: false, tables: [], configFile: '' };
  return {
    id: p.id,
    node: p.node,
    take: [...p.take],
    steps: [...p.steps],
    changes: (p.changes ?? []).map((c) => ({ ...c })),
    firewall: { kind: fw.kind, active: fw.active, tables: [...fw.tables], ...(fw.configFile ? { configFile: fw.configFile } : {}) },
    items: p.items.map((i) => ({
      source: oneOf(i.source, ['socket', 'published'], 'source'),
      protocol: oneOf(i.protocol, ['tcp', 'udp'], 'protocol'),
      port: i.port,
      address: i.address,
      holder: i.holder,
      declaredBy: i.declaredBy || null,
      after: oneOf(i.after, ['open', 'closes', 'local'], 'after'),
      ...(i.from.length ? { from: [...i.from] } : {}),
      ...nowFromWire(i),
      ...(i.liveConnections ? { liveConnections: i.liveConnections } : {}),
    })),
  };
}

function header(node: WireNodeStatus): string {
  if (node.mode === WIRE_MODE.ADOPTED) return `node ${node.name} is ADOPTED by its agent's last report: its found firewall is in force`;
  if (node.mode === WIRE_MODE.CONVERGED) return `node ${node.name} is converged by its agent's last report`;
  return `node ${node.name} has not reported its mode yet`;
}

const out = (a: { json: boolean }, line: string) => {
  if (!a.json) process.stdout.write(`${line}\n`);
};

/**
 * Polls the node until its agent reports the outcome of the request recorded at `version` (done or
 * refused); prints each new step of the lifecycle as it arrives. Nothing is taken from what was asked.
 */
async function follow(c: AdminClient, network: string, a: LifecycleArgs, version: number): Promise<{ node: WireNodeStatus; steps: string[] }> {
  const deadline = Date.now() + a.timeout * 1000;
  let printed = 0;
  for (;;) {
    const node = present((await c.call('showNode', { network, node: a.node })).node, 'node');
    const t = node.transition;
    const l = node.lifecycle;
    const ours = !!t && t.version >= version;
    const finished = ours && (t.state === 'done' || t.state === 'refused');
    if (l && ours && (finished || t.state === 'in-progress')) {
      for (const s of l.steps.slice(printed)) out(a, `-> ${s}`);
      printed = Math.max(printed, l.steps.length);
    }
    if (finished) return { node, steps: l?.steps ?? [] };
    if (Date.now() > deadline) {
      throw new Refusal(
        `MESHP_TIMEOUT: node ${a.node} did not report the outcome within ${a.timeout} s (${node.connected ? 'connected' : `not connected, last seen ${node.lastSeen || 'never'}`}; transition ${t?.state ?? 'unknown'}, reported version ${node.reportedVersion ?? 0} of ${version}); it is still ${modeName(node.mode)} by its last report; see meshp node show ${a.node}`,
      );
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

function refusedLine(n: WireNodeStatus): Refusal {
  const t = n.transition;
  return new Refusal(`${t?.code || 'MESHP_REFUSED'}: ${t?.message || 'the node refused'} (node ${n.name} is still ${modeName(n.mode)})`);
}

/** `meshp node converge NODE --preview | --yes [--preview-id ID]`. */
export async function nodeConverge(a: LifecycleArgs & { preview: boolean; yes: boolean; previewId?: string; allowClose?: string[] }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    if (a.preview || !a.yes) {
      const r = await c.call('previewConverge', { network, node: a.node });
      const node = present(r.node, 'node');
      const preview = previewFromWire(present(r.preview, 'preview'));
      if (a.preview && a.json) return printJson({ node: nodeJson(node), preview });
      out(a, `${header(node)}\n${renderPreview(preview)}`);
      if (a.preview) return out(a, `(preview: nothing changed; flip with meshp node converge ${a.node} --yes --preview-id ${preview.id})`);
      await confirmChange(false, `Converge ${a.node} to preview ${preview.id}?`, 'pass --yes (and --preview-id) to flip');
      a.previewId ??= preview.id;
    }
    const r = await c.call('convergeNode', { network, node: a.node, previewId: a.previewId ?? '', allowClose: a.allowClose ?? [] });
    const recorded = present(r.node, 'node');
    const preview = previewFromWire(present(r.preview, 'preview'));
    if (!a.preview && a.yes && !a.json) out(a, `${header(recorded)}\n${renderPreview(preview)}`);
    const version = recorded.transition?.version ?? recorded.stateVersion;
    out(a, `requested: ${a.node} converges to preview ${preview.id} (state version ${version}); waiting for its agent:`);
    const { node, steps } = await follow(c, network, a, version);
    if (a.json) printJson({ node: nodeJson(node), preview, steps, lifecycle: node.lifecycle, transition: nodeJson(node).transition });
    if (node.transition?.state !== 'done') throw refusedLine(node);
    out(a, `node ${a.node} converged, by its agent's report (preview ${node.lifecycle?.previewId || preview.id})`);
  });
}

/** `meshp node adopt NODE`: back to adopted; a converged node re-enables the found firewall it retired. */
export async function nodeAdopt(a: LifecycleArgs & { preview: boolean; yes: boolean }): Promise<void> {
  await withAdmin(a, async (c, network) => {
    const now = present((await c.call('showNode', { network, node: a.node })).node, 'node');
    const plan =
      now.mode === WIRE_MODE.CONVERGED
        ? [`re-enable the found firewall the flip retired`, `unload the mesh's derived filter`, `keep every module's resources; nothing more is taken`]
        : [`record ${a.node} adopted (it is ${modeName(now.mode)} by its last report): the machine's firewall is not changed`];
    if (a.preview) {
      if (a.json) return printJson({ node: nodeJson(now), steps: plan, changed: false });
      return out(a, `${header(now)}\nnode adopt ${a.node} would:\n${plan.map((s) => `  - ${s}`).join('\n')}\n(preview: nothing changed)`);
    }
    await confirmChange(
      a.yes,
      `Return ${a.node} to adopted?\n${plan.map((s) => `  - ${s}`).join('\n')}\n`,
      'pass --yes to return it (or --preview to see what it does)',
    );
    // Adopted by its agent's report and adopted as asked: a change that changes nothing: said at once,
    // with nothing asked of the agent and nothing waited for.
    if (now.mode === WIRE_MODE.ADOPTED && now.requestedMode === WIRE_MODE.ADOPTED) {
      if (a.json) return printJson({ node: nodeJson(now), steps: [], changed: false });
      return out(a, `node ${a.node} is already adopted, by its agent's last report: nothing to change`);
    }
    const r = await c.call('setMode', { network, node: a.node, mode: WIRE_MODE.ADOPTED });
    const recorded = present(r.node, 'node');
    const version = recorded.transition?.version ?? recorded.stateVersion;
    out(a, `requested: ${a.node} returns to adopted (state version ${version}); waiting for its agent:`);
    const { node, steps } = await follow(c, network, a, version);
    if (a.json) printJson({ node: nodeJson(node), steps, lifecycle: node.lifecycle, transition: nodeJson(node).transition });
    if (node.transition?.state !== 'done') throw refusedLine(node);
    out(a, `node ${a.node} is ADOPTED, by its agent's report: its found firewall is in force`);
  });
}

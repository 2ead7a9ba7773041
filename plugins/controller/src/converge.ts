/**
 * Converging a node through the controller (docs/adr/0002-adopt-before-converge.md): the preview is computed from the node's
 * last report and the declaration it is sent now, with core's `buildPreview` — the same function the
 * agent runs on the machine itself, so the same facts give the same id. The flip is recorded only
 * for the preview the operator saw; the agent re-checks that id against the machine before it
 * changes anything.
 */
import { MeshpError, type Protocol, type Reach, type ReportMessage } from '@meshp/core';
import { declarationFromWire } from '@meshp/core/delta';
import { validateDeclaration } from '@meshp/core/reconcile';
import { buildPreview, checkLiveDoors, noFilter, type ConvergePreview, type PreviewInputs } from '@meshp/core/lifecycle';
import type { Controller } from './controller.js';
import { notFound } from '@meshp/core/util';

const protocolOf = (p: string): Protocol => (p === 'udp' ? 'udp' : 'tcp');

const NOW = new Set<string>(['open', 'open-from', 'closed']);

/** The reach the node reported; an answer this end does not know is left out (its door then reads `unknown`). */
function reachOfReport(r: ReportMessage): Reach[] | undefined {
  if (!r.reach) return undefined;
  return r.reach
    .filter((x) => NOW.has(x.now) && (x.path === 'incoming' || x.path === 'forwarded'))
    .map((x) => ({
      port: x.port,
      protocol: protocolOf(x.protocol),
      path: x.path as Reach['path'],
      now: x.now as Reach['now'],
      ...(x.now === 'open-from' ? { from: [...x.from] } : {}),
      mentioned: x.mentioned,
    }));
}

/** What the node reported, as the facts a preview is built from. Reports of agents that do not say reach give `unknown`. */
export function factsOfReport(r: ReportMessage): Omit<PreviewInputs, 'declaration'> {
  const reach = reachOfReport(r);
  const settings = forwardingSteps(r);
  return {
    ...(reach ? { reach } : {}),
    ...(settings.length ? { settings } : {}),
    // The agent's preview counts what its plugins add to the converged plan: so does this one, from its report.
    pluginOpenings: r.pluginOpenings ?? [],
    pluginChanges: r.pluginChanges ?? [],
    listening: (r.listening ?? []).map((l) => ({
      protocol: protocolOf(l.protocol),
      address: l.address,
      port: l.port,
      family: l.address.includes(':') ? 6 : 4,
      ...(l.process ? { process: l.process } : {}),
      ...(l.pid ? { pid: l.pid } : {}),
      ...(l.established ? { established: l.established } : {}),
    })),
    published: (r.published ?? []).map((p) => ({
      container: p.container,
      hostPort: p.hostPort,
      containerPort: p.containerPort,
      hostIp: p.hostIp,
      protocol: protocolOf(p.protocol),
    })),
    firewall: {
      kind: r.firewallKind || 'none',
      manager: '',
      active: r.firewallActive,
      tables: [...(r.firewallTables ?? [])],
      ...(r.firewallConfigFile ? { configFile: r.firewallConfigFile } : {}),
      summary: [],
    },
  };
}

/**
 * A router's forwarding held off on the adopted node (issue 26, ADR 0032): the flip turns it on. An
 * agent with a firewall plugin reports the same change among its plugin changes (the tunnel's plan
 * action `file:/proc/sys/…`, listed by the agent's own preview too): said once, there.
 */
function forwardingSteps(r: ReportMessage): string[] {
  const f = r.forwarding;
  if (r.mode !== 'adopted' || !f) return [];
  const listed = new Set((r.pluginChanges ?? []).map((c) => c.key));
  return f.needed
    .filter((n) => f.values[n] !== '1' && !listed.has(`file:/proc/sys/${n.replace(/\./g, '/')}`))
    .map(
      (n) =>
        `turn on ${n} for the route groups this router serves (found ${f.values[n] || '(none)'}: recorded first, put back on the return to adopted or when it stops serving)`,
    );
}

/** The converge preview of a node, from its last report. Changes nothing. */
export function previewOf(controller: Controller, network: string, node: string, report: ReportMessage | null): ConvergePreview {
  const declaration = validateDeclaration(declarationFromWire(controller.declarationOf(network, node)));
  if (!report) throw new MeshpError('MESHP_LIFECYCLE', `node ${node} has not reported yet: there is nothing to preview from`);
  const preview = buildPreview({ declaration, ...factsOfReport(report) });
  return nothingToFlip(report) ? asNothingToFlip(preview) : preview;
}

/** A node without a firewall plugin: the agent loads no filter and retires none (core/agent/lifecycle.ts). */
export const nothingToFlip = (r: ReportMessage): boolean => !r.firewallKind || r.firewallKind === 'none';

/** What is true of such a node: nothing can hold its derived filter, so the flip is refused (core/agent/lifecycle.ts). The id stays the one the facts give. */
function asNothingToFlip(p: ConvergePreview): ConvergePreview {
  return { ...p, steps: [`REFUSED: ${noFilter(p.node).message}`] };
}

/**
 * Records the node converged with the preview computed now from its latest report; `previewId`,
 * when given, must be that preview's id (the node changed since otherwise).
 */
export function convergeNode(
  controller: Controller,
  network: string,
  node: string,
  report: ReportMessage | null,
  previewId?: string,
  allowClose: readonly string[] = [],
): { preview: ConvergePreview; stateVersion: number } {
  const member = controller.member(network, node);
  if (!member) throw notFound('node', node, network);
  if (member.mode === 'converged' && report?.lifecycle?.state === 'converged') {
    throw new MeshpError(
      'MESHP_LIFECYCLE',
      `node ${node} is already converged (preview ${report.lifecycle.previewId || 'none'}): adopt it first to flip again`,
    );
  }
  const preview = previewOf(controller, network, node, report);
  if (report && nothingToFlip(report)) throw noFilter(node);
  if (previewId && previewId !== preview.id) {
    throw new MeshpError('MESHP_PREVIEW_STALE', `node ${node} changed since preview ${previewId} (its last report gives ${preview.id}): preview again`);
  }
  checkLiveDoors(preview, allowClose);
  return { preview, stateVersion: controller.recordConverged(network, node, preview.id) };
}

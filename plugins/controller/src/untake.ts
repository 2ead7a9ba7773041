/**
 * Untaking a module through the controller (issue 29, docs/adr/0027): as the converge flip's remote
 * preview, but the plan is the agent's — only the machine can read a file's bytes, a container's image
 * and volumes. Each report of an adopted node carries each taken module's untake preview with its id;
 * the controller shows the last one and records the untake only for the id the operator saw and only
 * when nothing blocks it. The agent checks that id against the machine again before it changes anything.
 */
import { MeshpError, type ErrorCode, type ReportMessage, type UntakePreviewReport } from '@meshp/core';
import { notFound, usage } from '@meshp/core/util';
import type { Controller } from './controller.js';

/** The untake preview of `module` on `node`, from its last report. Changes nothing. */
export function untakePreviewOf(controller: Controller, network: string, node: string, module: string, report: ReportMessage | null): UntakePreviewReport {
  const member = controller.member(network, node);
  if (!member) throw notFound('node', node, network);
  if (!member.assigned.includes(module)) throw notFound('module', module, `the modules assigned to ${node}`, 'only an assigned, taken module can be untaken');
  if (member.mode === 'converged') {
    throw new MeshpError('MESHP_LIFECYCLE', `node ${node} is converged: untake is for a module taken on an adopted node (return it to adopted first)`);
  }
  if (!member.taken.includes(module)) {
    const asked = member.untaking?.[module];
    throw new MeshpError(
      'MESHP_UNTAKE_NOT_TAKEN',
      `module ${module} is not taken on node ${node}${asked ? ` (its untake was asked with preview ${asked})` : ''}: nothing to untake`,
    );
  }
  if (!report) throw new MeshpError('MESHP_LIFECYCLE', `node ${node} has not reported yet: there is nothing to preview from`);
  const preview = (report.untakePreviews ?? []).find((p) => p.module === module);
  if (!preview) {
    throw new MeshpError(
      'MESHP_LIFECYCLE',
      `node ${node}'s last report has no untake preview of ${module} (an older agent, or the take not reconciled yet): untake it on the machine with meshp host untake`,
    );
  }
  return preview;
}

/** Records the untake of `module` if `previewId` is still its preview and nothing blocks it. */
export function untakeModule(
  controller: Controller,
  network: string,
  node: string,
  module: string,
  report: ReportMessage | null,
  previewId: string,
): { preview: UntakePreviewReport; stateVersion: number } {
  if (!previewId) throw usage(`an untake needs the preview id the operator saw: meshp module untake ${node} ${module} --preview first`);
  const preview = untakePreviewOf(controller, network, node, module, report);
  if (previewId !== preview.id) {
    throw new MeshpError('MESHP_PREVIEW_STALE', `node ${node} changed since preview ${previewId} (its last report gives ${preview.id}): preview again`);
  }
  if (preview.blocks.length > 0) {
    const lines = preview.blocks.map((b) => `${b.code}: ${b.reason}${b.diff ? `\n${b.diff}` : ''}`);
    throw new MeshpError(preview.blocks[0]!.code as ErrorCode, `module ${module} cannot be untaken faithfully; nothing changed:\n${lines.join('\n')}`, {
      details: { module, blocks: preview.blocks },
    });
  }
  return { preview, stateVersion: controller.recordUntake(network, node, module, previewId) };
}

/** The release --restore preview of `module` on `node`, from its last report. Changes nothing. */
export function releasePreviewOf(controller: Controller, network: string, node: string, module: string, report: ReportMessage | null): UntakePreviewReport {
  const member = controller.member(network, node);
  if (!member) throw notFound('node', node, network);
  if (!member.assigned.includes(module)) throw notFound('module', module, `the modules assigned to ${node}`);
  if (member.taken.includes(module)) {
    throw new MeshpError(
      'MESHP_LIFECYCLE',
      `module ${module} is taken on node ${node}: release is for an assigned module not taken (untake it first: meshp module untake ${node} ${module})`,
    );
  }
  if (!report) throw new MeshpError('MESHP_LIFECYCLE', `node ${node} has not reported yet: there is nothing to preview from`);
  const preview = (report.releasePreviews ?? []).find((p) => p.module === module);
  // No held file reported: nothing to put back (or an older agent, which holds files as they are).
  return preview ?? { module, id: '', steps: [], blocks: [] };
}

/**
 * Releases `module` (unassigned, its held files left as they are); with `restore`, each held file that
 * changed while held gets its original back, to exactly `previewId`, if nothing blocks it.
 */
export function releaseModule(
  controller: Controller,
  network: string,
  node: string,
  module: string,
  report: ReportMessage | null,
  restore: boolean,
  previewId: string,
): { preview: UntakePreviewReport; stateVersion: number } {
  const preview = releasePreviewOf(controller, network, node, module, report);
  const restores = preview.steps.some((s) => s.op === 'restore');
  if (!restore || !restores) return { preview, stateVersion: controller.recordRelease(network, node, module, null) };
  if (!previewId) throw usage(`release --restore needs the preview id the operator saw: meshp module release ${node} ${module} --restore --preview first`);
  if (previewId !== preview.id) {
    throw new MeshpError('MESHP_PREVIEW_STALE', `node ${node} changed since preview ${previewId} (its last report gives ${preview.id}): preview again`);
  }
  if (preview.blocks.length > 0) {
    throw new MeshpError(
      preview.blocks[0]!.code as ErrorCode,
      `module ${module}'s held files cannot be put back; nothing changed: ${preview.blocks.map((b) => b.reason).join('; ')}`,
    );
  }
  return { preview, stateVersion: controller.recordRelease(network, node, module, previewId) };
}

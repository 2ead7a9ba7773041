/**
 * The admin calls of a module's untake (issue 29): the preview from the node's last report, and the
 * untake recorded for the preview the operator saw (../untake.ts). A change made is recorded in the
 * audit log (audit.ts); a preview is not.
 */
import type { AdminMethods, ReportMessage } from '@meshp/core';
import type { AdminAnswer, AdminApi } from '@meshp/protocol';
import type { Controller } from '../controller.js';
import { releaseModule, releasePreviewOf, untakeModule, untakePreviewOf } from '../untake.js';
import { usage } from '@meshp/core/util';

const need = (v: string, k: string): string => {
  if (!v) throw usage(`${k} is required`);
  return v;
};

export function untakeMethods(
  controller: Controller,
  reports: (network: string, node: string) => ReportMessage | null,
  node: (network: string, id: string) => AdminAnswer<'showNode'>['node'],
  changed: (network: string) => void,
): Pick<AdminMethods<AdminApi>, 'previewUntake' | 'untakeModule' | 'releaseModule'> {
  return {
    previewUntake: (r, net) => {
      const id = need(r.node, 'node');
      return { preview: untakePreviewOf(controller, net, id, need(r.module, 'module'), reports(net, id)), node: node(net, id) };
    },
    untakeModule: (r, net) => {
      const id = need(r.node, 'node');
      const out = untakeModule(controller, net, id, need(r.module, 'module'), reports(net, id), r.previewId);
      changed(net);
      return { ...out, node: node(net, id) };
    },
    releaseModule: (r, net) => {
      const id = need(r.node, 'node');
      const module = need(r.module, 'module');
      if (r.preview) return { preview: releasePreviewOf(controller, net, id, module, reports(net, id)), node: node(net, id), stateVersion: 0 };
      const out = releaseModule(controller, net, id, module, reports(net, id), r.restore, r.previewId);
      changed(net);
      return { ...out, node: node(net, id) };
    },
  };
}

/** What node show and doctor say of untakes (issue 29): the last report's previews and outcomes, and the untakes asked. */
export function untakeFacts(controller: Controller, network: string, node: string, last: ReportMessage | null) {
  const asked = controller.member(network, node)?.untaking ?? {};
  return {
    untakePreviews: last?.untakePreviews ?? [],
    untakes: last?.untakes ?? [],
    releasePreviews: last?.releasePreviews ?? [],
    untakesAsked: Object.entries(asked)
      .sort(([a], [b]) => (a < b ? -1 : 1))
      .map(([module, previewId]) => ({ module, previewId })),
  };
}

/**
 * `meshp node tag` (issue 28): a node's tags replaced as a normal change (its peers get it in their
 * next delta, as any member's change), previewed as the reachability diff a policy change is
 * (core's tagsReachDiff, read through the one diff reachDiff uses), with an id that the change is
 * made to exactly, or refused MESHP_PREVIEW_STALE with nothing changed.
 */
import { MeshpError, type AdminMethods } from '@meshp/core';
import { CONTROL_NODE_TAG, tagsPreviewId, tagsReachDiff } from '@meshp/core/delta';
import { notFound, usage } from '@meshp/core/util';
import type { AdminApi, AdminRequest } from '@meshp/protocol';
import type { Controller } from '../controller.js';
import { checkTags } from '../limits.js';

/** A tag as a policy names it (schemas/policy.schema.json): a letter or digit, then letters, digits, `_`, `.`, `-`. */
export const TAG = /^[a-zA-Z0-9][a-zA-Z0-9_.-]*$/;

/** The tags asked, bounded (as an enrolment's: limits.ts) and of a policy's form; sorted, without repeats. */
export function checkedTags(tags: readonly string[]): string[] {
  checkTags([...tags]);
  const bad = tags.filter((t) => !TAG.test(t));
  if (bad.length) throw usage(`tag ${JSON.stringify(bad[0])} is not valid: a letter or digit, then letters, digits, '_', '.' or '-'`);
  return [...new Set(tags)].sort();
}

/** What giving the node these tags changes, the id that names it, and the node's tags now. Changes nothing. */
export function previewTags(controller: Controller, net: string, r: AdminRequest<'setTags'>) {
  if (!r.node) throw usage('node is required');
  const tags = checkedTags(r.tags);
  const members = controller.members(net);
  const m = members.find((x) => x.id === r.node);
  if (!m) throw notFound('node', r.node, net);
  // The control-node's tag carries the mesh's own rule (every member reaches it): given to another
  // node it opens every member's filter to it, taken from the control-node it cuts every agent off.
  if (m.tags.includes(CONTROL_NODE_TAG) !== tags.includes(CONTROL_NODE_TAG))
    throw usage(`the tag ${CONTROL_NODE_TAG} is the control-node's, given at genesis: node tag neither gives it nor takes it away (nothing was changed)`);
  const rules = controller.policyInForce(net).rules;
  return {
    previewId: tagsPreviewId(net, rules, members, r.node, tags),
    changes: tagsReachDiff(members, rules, r.node, tags),
    tagsBefore: [...m.tags].sort(),
    tagsAfter: tags,
    unchanged: JSON.stringify([...m.tags].sort()) === JSON.stringify(tags),
  };
}

export function tagsMethods(controller: Controller, changed: (network: string) => void): Pick<AdminMethods<AdminApi>, 'setTags'> {
  return {
    setTags: (r, net) => {
      const p = previewTags(controller, net, r);
      if (r.preview) return { ...p, stateVersion: controller.stateVersion(net) };
      if (r.previewId && r.previewId !== p.previewId) {
        throw new MeshpError(
          'MESHP_PREVIEW_STALE',
          `the policy in force, the membership or the tags of ${net} changed since preview ${r.previewId} (it gives ${p.previewId} now): preview again, nothing was changed`,
        );
      }
      // The same tags again: no version, no delta.
      const stateVersion = p.unchanged ? controller.stateVersion(net) : controller.setTags(net, r.node, p.tagsAfter);
      if (!p.unchanged) changed(net);
      return { ...p, stateVersion };
    },
  };
}

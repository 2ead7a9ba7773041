/**
 * The policy an operator can read, diff and test (issue 28): `policy get`, `policy set --preview`
 * (the reachability diff, computed here from the scope the deltas use: core's reachDiff), `policy
 * test`, and `policy set` itself, which runs the file's tests first and, given a preview id, sets the
 * policy only if that is still the preview of it (the policy in force and the membership unmoved).
 */
import { MeshpError, type AdminMethods } from '@meshp/core';
import {
  failureText,
  policyPreviewId,
  reachDiff,
  reachMatrix,
  runPolicyTests,
  type PolicyRule,
  type PolicyTestRecord,
  type PolicyTestResult,
} from '@meshp/core/delta';
import { checkPolicy, checkPolicyTests } from '@meshp/core/schema';
import type { AdminApi, AdminRequest } from '@meshp/protocol';
import type { Controller } from '../controller.js';
import { tagsMethods } from './tags-admin.js';

type PolicyMethod = 'getPolicy' | 'previewPolicy' | 'testPolicy' | 'setPolicy' | 'setTags';
type WireRules = AdminRequest<'setPolicy'>['rules'];
type WireTests = AdminRequest<'setPolicy'>['tests'];

const rulesToWire = (rules: readonly PolicyRule[]) => rules.map((r) => ({ fromTag: r.from, toTag: r.to, ports: [...(r.ports ?? [])] }));
const resultToWire = (r: PolicyTestResult) => ({ ...r, test: { ...r.test } });

/** The wire's rules and tests, checked by the one schema before anything is computed or stored. */
function fromWire(rules: WireRules, tests: WireTests | undefined): { rules: PolicyRule[]; tests: PolicyTestRecord[] } {
  return {
    rules: checkPolicy(rules.map((x) => ({ from: x.fromTag, to: x.toTag, ...(x.ports.length ? { ports: x.ports } : {}) }))),
    tests: checkPolicyTests((tests ?? []).map((x) => ({ from: x.from, to: x.to, port: x.port, expect: x.expect }))),
  };
}

/** A policy whose tests fail is refused, each failing assertion named; nothing is set. */
function refuseFailing(results: PolicyTestResult[]): void {
  const failed = results.filter((r) => !r.passed);
  if (!failed.length) return;
  throw new MeshpError(
    'MESHP_POLICY_TEST_FAILED',
    `${failed.length} of the policy's ${results.length} test(s) failed, nothing was set: ${failed.map(failureText).join('; ')}`,
    { details: { failed: failed.map((r) => ({ ...r.test, got: r.got, reason: r.reason })) } },
  );
}

/** The diff of `rules` against the policy in force, its id and the tests' results. Changes nothing. */
export function previewPolicy(controller: Controller, net: string, rules: PolicyRule[], tests: PolicyTestRecord[]) {
  const now = controller.policyInForce(net);
  const members = controller.members(net);
  return {
    previewId: policyPreviewId(net, now.rules, rules, tests, members),
    stateVersion: now.stateVersion,
    policyVersion: now.policyVersion,
    changes: reachDiff(members, now.rules, rules),
    tests: runPolicyTests(rules, tests, members),
    unchanged: JSON.stringify(now.rules) === JSON.stringify(rules) && JSON.stringify(now.tests) === JSON.stringify(tests),
  };
}

export function policyMethods(controller: Controller, changed: (network: string) => void): Pick<AdminMethods<AdminApi>, PolicyMethod> {
  return {
    getPolicy: (r, net) => {
      const p = controller.policyInForce(net);
      const base = { rules: rulesToWire(p.rules), tests: p.tests, policyVersion: p.policyVersion, stateVersion: p.stateVersion };
      // The matrix only when asked (the console's policy page): rows × columns pairs that `policy get` has no use for.
      if (!r.withReach) return { ...base, reach: [], reachColumns: [], reachOmittedOf: 0 };
      const members = controller.members(net);
      // A node's name or one of its tags; empty: every member.
      const named = (term: string | undefined) => (term ? members.filter((m) => m.id === term || m.tags.includes(term)) : members);
      const rows = named(r.reachFrom);
      const columns = named(r.reachTo);
      const larger = Math.max(rows.length, columns.length);
      // Over the bound on a side: none of it computed, only how many it would have been.
      if (r.reachMax && larger > r.reachMax) return { ...base, reach: [], reachColumns: [], reachOmittedOf: larger };
      const reach = reachMatrix(rows, p.rules, columns);
      return { ...base, reach, reachColumns: columns.map((m) => m.id).sort((a, b) => a.localeCompare(b)), reachOmittedOf: 0 };
    },
    previewPolicy: (r, net) => {
      const input = fromWire(r.rules, r.tests);
      const p = previewPolicy(controller, net, input.rules, input.tests);
      return { ...p, tests: p.tests.map(resultToWire) };
    },
    testPolicy: (r, net) => {
      const input = fromWire(r.rules, r.tests);
      return { results: runPolicyTests(input.rules, input.tests, controller.members(net)).map(resultToWire) };
    },
    setPolicy: (r, net) => {
      const input = fromWire(r.rules, r.tests);
      // The preview's id and the tests, not its diff: the reach diff is every pair whose reach moves
      // (25 million at 5,000 nodes all-to-all, most of the call's time and memory), and only
      // previewPolicy shows it (issue 31).
      const now = controller.policyInForce(net);
      const members = controller.members(net);
      refuseFailing(runPolicyTests(input.rules, input.tests, members));
      const previewId = policyPreviewId(net, now.rules, input.rules, input.tests, members);
      if (r.previewId && r.previewId !== previewId) {
        throw new MeshpError(
          'MESHP_PREVIEW_STALE',
          `the policy in force or the membership of ${net} changed since preview ${r.previewId} (it gives ${previewId} now): preview again, nothing was set`,
        );
      }
      const stateVersion = controller.setPolicy(net, input.rules, input.tests);
      changed(net);
      return { stateVersion };
    },
    // A node's tags, previewed as the same diff under the policy in force: tags-admin.ts.
    ...tagsMethods(controller, changed),
  };
}

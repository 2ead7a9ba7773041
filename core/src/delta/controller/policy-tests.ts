/**
 * A policy's tests (issue 28): `{ from, to, port, expect: accept | deny }`, each end a node's name or
 * `tag:NAME`, run against a rule set before it is set. A test is read as the tunnel's filter reads the
 * rules (plugins/tunnel-wireguard: a rule from one of `from`'s tags to one of `to`'s, its ports empty
 * or holding the port), plus the mesh's own rule: a control-node's foundation ports (its settings) are
 * reached by every member, whatever the policy.
 */
import { PolicyIndex, isControlNode } from './policy.js';
import type { MemberRecord, PolicyRule, PolicyTestRecord } from './records.js';

export type PolicyTest = PolicyTestRecord;

export interface PolicyTestResult {
  test: PolicyTest;
  passed: boolean;
  /** What the rules do, or `unknown` when an end names no node. */
  got: 'accept' | 'deny' | 'unknown';
  reason: string;
}

const TAG = 'tag:';

/** The tags an end stands for, and the members it names (a tag's holders); null: no node of that name. */
function resolve(end: string, members: ReadonlyMap<string, MemberRecord>): { tags: string[]; nodes: MemberRecord[] } | null {
  if (end.startsWith(TAG)) {
    const tag = end.slice(TAG.length);
    return { tags: [tag], nodes: [...members.values()].filter((m) => m.tags.includes(tag)) };
  }
  const m = members.get(end);
  return m ? { tags: [...m.tags], nodes: [m] } : null;
}

/** Whether a rule's port spec ("80", "8000-8100/tcp") holds this port and protocol. */
function portMatches(spec: string, port: number, protocol: string): boolean {
  const [range, proto] = spec.split('/') as [string, string?];
  if (proto && proto !== protocol) return false;
  const [lo, hi = lo] = range.split('-').map(Number) as [number, number?];
  return port >= lo && port <= hi!;
}

const ruleText = (r: PolicyRule) => `${r.from} -> ${r.to}${r.ports?.length ? ` ports ${r.ports.join(',')}` : ''}`;

/** One test against the rules: accepted by the first rule that lets it through, or by the mesh's own rule. */
function runOne(policy: PolicyIndex, members: ReadonlyMap<string, MemberRecord>, test: PolicyTest): PolicyTestResult {
  const from = resolve(test.from, members);
  const to = resolve(test.to, members);
  if (!from || !to) {
    const missing = !from ? test.from : test.to;
    return { test, passed: false, got: 'unknown', reason: `no node named ${missing} (a tag is written tag:NAME)` };
  }
  const [p, protocol = 'tcp'] = test.port.split('/') as [string, string?];
  const port = Number(p);
  const fromTags = new Set(from.tags);
  const rule = policy
    .inboundRules(to.tags)
    .find((r) => fromTags.has(r.from) && (!r.ports?.length || r.ports.some((s) => portMatches(String(s), port, protocol))));
  const foundation = protocol === 'tcp' && to.nodes.some((m) => isControlNode(m.tags) && Object.values(m.settings.ports).includes(port));
  const got = rule || foundation ? 'accept' : 'deny';
  const reason = rule
    ? `accepted by the rule ${ruleText(rule)}`
    : foundation
      ? `accepted by the mesh's own rule: ${port}/tcp is a foundation port of the control-node`
      : `no rule lets ${[...fromTags].join(',') || '(no tags)'} reach ${to.tags.join(',') || '(no tags)'} on ${port}/${protocol}`;
  return { test, passed: got === test.expect, got, reason };
}

/** Every test against the rules, in the file's order. */
export function runPolicyTests(rules: readonly PolicyRule[], tests: readonly PolicyTest[], members: Iterable<MemberRecord>): PolicyTestResult[] {
  const policy = new PolicyIndex(rules);
  const byName = new Map<string, MemberRecord>();
  for (const m of members) byName.set(m.id, m);
  return tests.map((t) => runOne(policy, byName, t));
}

/** A failing test said in one line: what was expected, what the policy does, and why. */
export function failureText(r: PolicyTestResult): string {
  return `${r.test.from} -> ${r.test.to} ${r.test.port}: expected ${r.test.expect}, got ${r.got} (${r.reason})`;
}

/** The catalogue's and the policy's inputs, checked the same way by the CLI (before sending) and the controller (before storing). */
import type { ModuleDecl } from '../contract/model.js';
import { checkInput } from './check.js';
import { MAX_POLICY_TESTS, catalogueFileSchema, moduleDefSchema, policyFileSchema, policyRuleSchema, policyTestSchema } from './declaration.js';
import { validateDeclaration } from './validate.js';

export interface PolicyRuleInput {
  from: string;
  to: string;
  ports?: string[];
}

/** Modules to define: each valid alone, and valid together as one node's declaration (no key declared twice, no name twice). */
export function checkModuleDefs(modules: unknown): Omit<ModuleDecl, 'taken'>[] {
  const list = checkInput(moduleDefSchema.array().min(1).max(1024), modules, 'catalogue');
  // Together, as one node would get them all (a placeholder range stands for a range here).
  const concrete = JSON.parse(JSON.stringify(list).replace(/"\{\{\s*privateRange\s*\}\}"/g, '"10.0.0.0/8"')) as typeof list;
  validateDeclaration({
    apiVersion: 'meshp/v1',
    node: 'catalogue',
    mode: 'adopted',
    settings: { ports: {} },
    modules: concrete.map((m) => ({ ...m, taken: false })),
  });
  return list as Omit<ModuleDecl, 'taken'>[];
}

/** `catalogue add FILE`'s document: one module, a list, or { "modules": [...] }. */
export function readCatalogueFile(doc: unknown): Omit<ModuleDecl, 'taken'>[] {
  // The shape is read from the document first, so a refusal names the field of the shape meant.
  if (Array.isArray(doc)) return checkModuleDefs(doc);
  if (typeof doc === 'object' && doc !== null && 'modules' in doc) {
    const { $schema: _s, ...rest } = doc as Record<string, unknown>;
    if (Object.keys(rest).length > 1) checkInput(catalogueFileSchema, doc, 'catalogue file');
    return checkModuleDefs(rest.modules);
  }
  return checkModuleDefs([doc]);
}

/** Policy rules, ports as the wire carries them (strings). */
export function checkPolicy(rules: unknown): PolicyRuleInput[] {
  const list = checkInput(policyRuleSchema.array().max(10_000), rules, 'policy', 'MESHP_POLICY_INVALID');
  return list.map((r) => ({ from: r.from, to: r.to, ...(r.ports?.length ? { ports: r.ports.map(String) } : {}) }));
}

/** A policy test as the wire carries it: the port a string ("80/tcp"), tcp when not said. */
export interface PolicyTestInput {
  from: string;
  to: string;
  port: string;
  expect: 'accept' | 'deny';
}

/** A policy's tests, ports as the wire carries them (strings, the protocol said). */
export function checkPolicyTests(tests: unknown): PolicyTestInput[] {
  const list = checkInput(policyTestSchema.array().max(MAX_POLICY_TESTS), tests, 'policy tests', 'MESHP_POLICY_INVALID');
  return list.map((x) => ({ from: x.from, to: x.to, port: withProtocol(String(x.port)), expect: x.expect }));
}

const withProtocol = (p: string): string => (p.includes('/') ? p : `${p}/tcp`);

/** `policy set FILE`'s document: { "rules": [...] } or a bare list. An empty policy must be said in so many words. */
export function readPolicyFile(doc: unknown): PolicyRuleInput[] {
  return readPolicyDocument(doc).rules;
}

/** `policy set FILE`'s document whole: its rules and its tests (none in a bare list). */
export function readPolicyDocument(doc: unknown): { rules: PolicyRuleInput[]; tests: PolicyTestInput[] } {
  if (Array.isArray(doc)) return { rules: checkPolicy(doc), tests: [] };
  const d = checkInput(policyFileSchema.options[0], doc, 'policy file', 'MESHP_POLICY_INVALID');
  return { rules: checkPolicy(d.rules), tests: checkPolicyTests(d.tests ?? []) };
}

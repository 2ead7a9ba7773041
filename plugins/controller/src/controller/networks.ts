/**
 * Changes to a network and what its members share: the network made and forgotten, its policy,
 * its shared components, its catalogue of modules. Each change is one version (log.ts).
 */
import { MeshpError } from '@meshp/core';
import {
  NetworkState,
  PolicyIndex,
  SCOPE_RULE,
  emptyDns,
  type ModuleDef,
  type NetworkRecord,
  type PolicyRule,
  type PolicyTestRecord,
  type SharedComponentName,
  type SharedComponents,
} from '@meshp/core/delta';
import { checkModule, checkPolicy } from '../limits.js';
import { checkNoClash } from '../clash.js';
import { checkDefinable } from '../declarable.js';
import { commit } from './log.js';
import type { ControllerState } from './state.js';
import { notFound, usage } from '@meshp/core/util';
import { canonicalJson } from '@meshp/core/reconcile';

export function createNetwork(
  s: ControllerState,
  name: string,
  options: { logDepth?: number; privateRange?: string; privateNetwork?: 'tunnel' | 'interface' },
): void {
  if (s.networks.has(name)) throw usage(`network ${name} exists`);
  const record: NetworkRecord = {
    name,
    version: 0,
    logFloor: 0,
    logDepth: options.logDepth ?? s.logDepth,
    policy: [],
    components: { dns: emptyDns(), relays: { relays: [] }, routeGroups: { groups: [] } },
    modules: {},
    privateRange: options.privateRange ?? '100.96.0.0/16',
    ...(options.privateNetwork ? { privateNetwork: options.privateNetwork } : {}),
    nextHost: 1,
    scopeRule: SCOPE_RULE,
  };
  s.networks.set(name, new NetworkState(record));
  s.store.transaction(() => s.store.putNetwork(record));
}

export function removeNetwork(s: ControllerState, name: string): void {
  const net = s.net(name);
  if (net.members.size > 0) throw usage(`network ${name} still has ${net.members.size} node(s): remove them first`);
  s.networks.delete(name);
  s.store.transaction(() => s.store.deleteNetwork(name));
}

/**
 * The policy and its tests (issue 28: run by the caller before this, admin.ts), in one version that
 * is recorded as the policy's. Tests alone changed: a version too (the file set is another), and no
 * view moves, so nothing is sent.
 */
export function setPolicy(s: ControllerState, network: string, rules: PolicyRule[], tests: PolicyTestRecord[] = []): number {
  checkPolicy(rules);
  const net = s.net(network);
  const after = rules.map((r) => ({ from: r.from, to: r.to, ...(r.ports?.length ? { ports: [...r.ports] } : {}) }));
  const testsAfter = tests.map((x) => ({ ...x }));
  // The policy in force set again: no version, nothing sent.
  if (canonicalJson(after) === canonicalJson(net.record.policy) && canonicalJson(testsAfter) === canonicalJson(net.record.policyTests ?? []))
    return net.version;
  return commit(s, net, { version: 0, kind: 'policy', before: net.record.policy, after }, () => {
    net.record.policy = after;
    if (testsAfter.length) net.record.policyTests = testsAfter;
    else delete net.record.policyTests;
    // commit has moved the version already: this one is the policy's.
    net.record.policyVersion = net.record.version;
    net.policy = new PolicyIndex(after);
  });
}

export function setComponent<K extends SharedComponentName>(s: ControllerState, network: string, name: K, value: SharedComponents[K]): number {
  const net = s.net(network);
  const after = structuredClone(value);
  if (canonicalJson(after) === canonicalJson(net.record.components[name])) return net.version;
  return commit(s, net, { version: 0, kind: 'component', name, before: net.record.components[name], after }, () => {
    net.record.components = { ...net.record.components, [name]: after };
  });
}

export function defineModule(s: ControllerState, network: string, def: ModuleDef): number {
  checkModule(def);
  const net = s.net(network);
  for (const m of net.members.values()) if (m.assigned.includes(def.name)) checkNoClash(m, (x) => (x === def.name ? def : net.moduleOf(x)));
  checkDefinable(def, net.members.values());
  const after = structuredClone(def);
  // The same definition again (a catalogue added twice): no version, nothing sent.
  if (canonicalJson(after) === canonicalJson(net.record.modules[def.name] ?? null)) return net.version;
  return commit(s, net, { version: 0, kind: 'module', name: def.name, before: net.record.modules[def.name] ?? null, after }, () => {
    net.record.modules = { ...net.record.modules, [def.name]: after };
  });
}

/**
 * Several modules as one change to the store (catalogue add): all of them or none. Each is
 * checked before any is stored; a store that fails midway rolls back in one transaction, and
 * what the controller holds in memory is put back with it (state.ts restore).
 */
export function defineModules(s: ControllerState, network: string, defs: ModuleDef[]): number {
  for (const def of defs) checkModule(def);
  let version = s.net(network).record.version;
  s.store.transaction(() => {
    for (const def of defs) version = defineModule(s, network, def);
  });
  return version;
}

export function removeModule(s: ControllerState, network: string, name: string): number {
  const net = s.net(network);
  const before = net.record.modules[name];
  if (!before) throw notFound('module', name, `the catalogue of ${network}`);
  const holders = [...net.members.values()]
    .filter((m) => m.assigned.includes(name))
    .map((m) => m.id)
    .sort();
  if (holders.length) {
    throw new MeshpError(
      'MESHP_MODULE_ASSIGNED',
      `module ${name} is assigned to ${holders.join(', ')}: unassign it from ${holders.length === 1 ? 'that node' : 'those nodes'} first (meshp module unassign NODE ${name} --yes); nothing was removed`,
      { details: { module: name, nodes: holders } },
    );
  }
  return commit(s, net, { version: 0, kind: 'module', name, before, after: null }, () => {
    const { [name]: _gone, ...rest } = net.record.modules;
    net.record.modules = rest;
  });
}

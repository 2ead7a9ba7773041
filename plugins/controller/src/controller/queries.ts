/**
 * The controller's answers: its networks, their members, policy and catalogue, and each node's
 * status (its convergence gap) for list, show and doctor. None of them writes to the store; a
 * status first brings the node's target up to date in memory (refreshTarget).
 */
import type { WireDeclaration } from '@meshp/core';
import {
  declarationFor,
  refreshTarget,
  type MemberRecord,
  type ModuleDef,
  type NetworkState,
  type PolicyRule,
  type PolicyTestRecord,
  type SentSummary,
  type SyncRecord,
} from '@meshp/core/delta';
import { statusOf, type NodeStatus } from '../status.js';
import type { ControllerState } from './state.js';

export function networks(s: ControllerState): string[] {
  return [...s.networks.keys()];
}

export function networkInfo(s: ControllerState, name: string): { name: string; stateVersion: number; members: number; privateRange: string } {
  const net = s.net(name);
  return { name, stateVersion: net.version, members: net.members.size, privateRange: net.record.privateRange };
}

export function isTunnelNetwork(s: ControllerState, network: string): boolean {
  return s.net(network).record.privateNetwork === 'tunnel';
}

export function stateVersion(s: ControllerState, network: string): number {
  return s.net(network).version;
}

export function logDepth(s: ControllerState, network: string): number {
  return s.net(network).record.logDepth;
}

export function member(s: ControllerState, network: string, id: string): MemberRecord | undefined {
  return s.net(network).members.get(id);
}

export function memberByKey(s: ControllerState, network: string, nodeKey: string): MemberRecord | undefined {
  const net = s.net(network);
  const id = net.byKey.get(nodeKey);
  if (id === undefined) return undefined;
  const m = net.members.get(id);
  // Kept in step by putMember/deleteMember; a library use may give two members one key: then look.
  return m?.nodeKey === nodeKey ? m : [...net.members.values()].find((x) => x.nodeKey === nodeKey);
}

export function members(s: ControllerState, network: string): MemberRecord[] {
  return [...s.net(network).members.values()];
}

export function policy(s: ControllerState, network: string): PolicyRule[] {
  return [...s.net(network).record.policy];
}

export function policyInForce(
  s: ControllerState,
  network: string,
): { rules: PolicyRule[]; tests: PolicyTestRecord[]; policyVersion: number; stateVersion: number } {
  const r = s.net(network).record;
  return { rules: structuredClone(r.policy), tests: structuredClone(r.policyTests ?? []), policyVersion: r.policyVersion ?? 0, stateVersion: r.version };
}

export function declarationOf(s: ControllerState, network: string, id: string): WireDeclaration {
  const net = s.net(network);
  return declarationFor(s.member(net, id), net.moduleOf);
}

export function modules(s: ControllerState, network: string): ModuleDef[] {
  return Object.values(s.net(network).record.modules)
    .map((m) => structuredClone(m))
    .sort((a, b) => a.name.localeCompare(b.name));
}

export function listNodesPage(s: ControllerState, network: string, after: string, limit: number): { nodes: NodeStatus[]; next: string } {
  const net = s.net(network);
  const ids = [...net.members.keys()].filter((id) => after === '' || id.localeCompare(after) > 0).sort((a, b) => a.localeCompare(b));
  const page = ids.slice(0, Math.max(1, limit));
  return { nodes: page.map((id) => statusOf(net, net.members.get(id)!, checked(s, net, id))), next: ids.length > page.length ? page.at(-1)! : '' };
}

export function showNode(s: ControllerState, network: string, id: string): { node: NodeStatus; recentDeltas: SentSummary[] } {
  const net = s.net(network);
  const sync = checked(s, net, s.member(net, id).id);
  return { node: statusOf(net, net.members.get(id)!, sync), recentDeltas: [...sync.recent] };
}

export function doctor(
  s: ControllerState,
  network: string,
  id: string,
): { node: NodeStatus; recentDeltas: SentSummary[]; expectedHash: string; hashMatches: boolean; snapshotPending: boolean; logFloor: number } {
  const net = s.net(network);
  const { node, recentDeltas } = showNode(s, network, id);
  const sync = s.sync(net, id);
  return {
    node,
    recentDeltas,
    expectedHash: sync.appliedHash,
    hashMatches: sync.lastAgentHash === sync.appliedHash,
    snapshotPending: sync.snapshotPending,
    logFloor: net.record.logFloor,
  };
}

/** The sync record with its target brought up to date (for the gap an operator reads). */
function checked(s: ControllerState, net: NetworkState, id: string): SyncRecord {
  const r = s.sync(net, id);
  refreshTarget(net, id, r);
  return r;
}

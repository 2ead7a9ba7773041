/**
 * Changes to a network's memberships: a node joins (by itself or with a token), leaves, is renamed,
 * and its key, tags, mode and modules change. Each is one version of the network (log.ts).
 */
import { isDeepStrictEqual } from 'node:util';
import { type Mode } from '@meshp/core';
import type { MemberRecord, NetworkRecord, NetworkState } from '@meshp/core/delta';
import type { TokenRecord } from '../tokens.js';
import { newSync } from '../status.js';
import { checkAssigned, checkMember, checkTags } from '../limits.js';
import { checkNoClash } from '../clash.js';
import { checkTunnelKey } from '../tunnel-key.js';
import { checkDeclarable } from '../declarable.js';
import { commit } from './log.js';
import { withoutRelease, withoutUntake } from './module-marks.js';
import type { MemberInput } from './options.js';
import { dirtyKey, type ControllerState } from './state.js';
import { nameTaken, notFound, usage } from '@meshp/core/util';

export function join(s: ControllerState, network: string, input: MemberInput): number {
  checkMember(input);
  const net = s.net(network);
  if (net.members.has(input.id)) throw nameTaken(input.id, network);
  if (input.tunnelKey) checkTunnelKey(input.tunnelKey, net.members.values(), input.id);
  const m: MemberRecord = {
    id: input.id,
    nodeKey: input.nodeKey,
    addresses: input.addresses ? [...input.addresses] : [allocate(net.record)],
    tags: sorted(input.tags ?? []),
    endpoints: [...(input.endpoints ?? [])],
    mode: input.mode ?? 'converged',
    assigned: [],
    taken: [],
    settings: input.settings ?? { ports: {} },
    ...(input.tunnelKey ? { tunnelKey: input.tunnelKey } : {}),
    ...(input.ephemeralSeconds ? { ephemeralSeconds: input.ephemeralSeconds } : {}),
  };
  return changeMember(s, net, input.id, m, true);
}

export function leave(s: ControllerState, network: string, id: string): number {
  const net = s.net(network);
  s.member(net, id);
  return changeMember(s, net, id, null);
}

/**
 * A new name for the node, in one version: its peers see the old name removed and the new one
 * upserted in the same delta (same key, so a tunnel keyed by it need not move); its sync record
 * follows it.
 */
export function renameNode(s: ControllerState, network: string, id: string, to: string): number {
  const net = s.net(network);
  const before = s.member(net, id);
  // Its own name again: nothing to change (the current version is answered, no delta is sent).
  if (to === id) return net.version;
  if (net.members.has(to)) throw nameTaken(to, network);
  const after: MemberRecord = { ...structuredClone(before), id: to };
  const changes = [
    { id, before, after: null },
    { id: to, before: null, after },
  ];
  return commit(s, net, { version: 0, kind: 'members', changes }, () => {
    const sync = net.sync.get(id) ?? newSync();
    net.deleteMember(id);
    net.sync.delete(id);
    s.store.deleteMember(net.record.name, id);
    s.store.deleteSync(net.record.name, id);
    net.putMember(after);
    net.sync.set(to, sync);
    s.store.putMember(net.record.name, after);
    s.store.putSync(net.record.name, to, sync);
  });
}

export function updateMember(s: ControllerState, network: string, id: string, patch: Partial<Omit<MemberRecord, 'id'>>): number {
  const net = s.net(network);
  const m = { ...s.member(net, id), ...structuredClone(patch) };
  if (patch.tags) m.tags = sorted(patch.tags);
  // New settings fill the node's modules anew: settings its assigned modules name cannot go (declarable.ts).
  if (patch.settings) checkDeclarable(m, net.moduleOf);
  // The same tags, settings or key again: nothing to change (the current version is answered). A
  // flip asked again (the same preview after a refusal) is a new request: setMode and recordConverged decide.
  const asks = 'mode' in patch || 'convergePreviewId' in patch;
  if (!asks && isDeepStrictEqual(m, s.member(net, id))) return net.version;
  return changeMember(s, net, id, m);
}

/**
 * The node's new tunnel key (a rotation, or a tunnel started after enrolment): a normal change,
 * so every peer that sees the node gets it in its next delta. The same key again changes nothing
 * (the current version is returned); '' withdraws it.
 */
export function setTunnelKey(s: ControllerState, network: string, id: string, tunnelKey: string): number {
  const net = s.net(network);
  const m = s.member(net, id);
  if ((m.tunnelKey ?? '') === tunnelKey) return net.version;
  if (tunnelKey) checkTunnelKey(tunnelKey, net.members.values(), id);
  const after: MemberRecord = { ...structuredClone(m) };
  if (tunnelKey) after.tunnelKey = tunnelKey;
  else delete after.tunnelKey;
  return changeMember(s, net, id, after);
}

export function setMode(s: ControllerState, network: string, id: string, mode: Mode): number {
  const m = s.member(s.net(network), id);
  // In that mode already, with no flip asked: nothing to change, no transition to wait for.
  if (m.mode === mode && !m.convergePreviewId) return s.net(network).version;
  return requested(s, network, id, () => updateMember(s, network, id, { mode, convergePreviewId: '' }));
}

export function recordConverged(s: ControllerState, network: string, id: string, previewId: string): number {
  return requested(s, network, id, () => updateMember(s, network, id, { mode: 'converged', convergePreviewId: previewId }));
}

/**
 * Marks the version a change of mode was asked at: the node's transition is `requested` until its
 * agent reports past it. The mark is written in the change's own transaction: both or neither.
 */
function requested(s: ControllerState, network: string, id: string, change: () => number): number {
  let version = 0;
  s.store.transaction(() => {
    const before = s.net(network).version;
    version = change();
    // Nothing changed (the node is in that mode already): no transition is asked, none waits for a report.
    if (version === before) return;
    const net = s.net(network);
    const sync = s.sync(net, id);
    sync.requestedVersion = version;
    s.dirty.delete(dirtyKey(network, id));
    s.store.putSync(network, id, sync);
  });
  return version;
}

export function assignModule(s: ControllerState, network: string, id: string, module: string): number {
  const net = s.net(network);
  const m = s.member(net, id);
  if (!net.moduleOf(module)) throw notFound('module', module, `the catalogue of ${network}`, 'add it with meshp catalogue add');
  // Assigned already: a change that changes nothing, no version (a flip asked again is not this: recordConverged asks anew).
  if (m.assigned.includes(module)) return net.version;
  checkAssigned(
    id,
    [...new Set([...m.assigned, module])].map((x) => net.record.modules[x]),
  );
  checkNoClash({ ...m, assigned: sorted([...new Set([...m.assigned, module])]) }, net.moduleOf);
  // A declaration that could not be sent (a setting the node lacks) is refused here, never stored (declarable.ts).
  checkDeclarable({ ...m, assigned: sorted([...new Set([...m.assigned, module])]) }, net.moduleOf);
  return updateMember(s, network, id, { assigned: sorted([...new Set([...m.assigned, module])]), ...withoutRelease(m.releasing, module) });
}

export function unassignModule(s: ControllerState, network: string, id: string, module: string): number {
  const m = s.member(s.net(network), id);
  return updateMember(s, network, id, {
    assigned: m.assigned.filter((x) => x !== module),
    taken: m.taken.filter((x) => x !== module),
    ...withoutUntake(m.untaking, module),
  });
}

export function takeModule(s: ControllerState, network: string, id: string, module: string): number {
  const net = s.net(network);
  const m = s.member(net, id);
  if (!m.assigned.includes(module)) throw usage(`module ${module} is not assigned to ${id}`);
  if (m.taken.includes(module)) return net.version;
  // An assignment stored before it was checked: its cutover is refused as its assignment would be now.
  checkDeclarable({ ...m, taken: sorted([...new Set([...m.taken, module])]) }, net.moduleOf);
  return updateMember(s, network, id, { taken: sorted([...new Set([...m.taken, module])]), ...withoutUntake(m.untaking, module) });
}

export function createToken(
  s: ControllerState,
  network: string,
  options: { mode?: Mode; tags?: string[]; ttlSeconds?: number; ephemeralSeconds?: number },
): TokenRecord {
  s.net(network);
  checkTags(options.tags);
  return s.tokens.create(network, options);
}

export function enrol(s: ControllerState, token: string, input: Omit<MemberInput, 'mode' | 'tags'>): { network: string; member: MemberRecord } {
  checkMember(input); // before the token is taken: a refused enrolment does not burn it
  // The token is taken in the join's transaction: a join the store refuses leaves the token as it was.
  let network = '';
  s.store.transaction(() => {
    const t = s.tokens.take(token);
    network = t.network;
    join(s, t.network, { ...input, mode: t.mode, tags: t.tags, ...(t.ephemeralSeconds ? { ephemeralSeconds: t.ephemeralSeconds } : {}) });
  });
  return { network, member: s.net(network).members.get(input.id)! };
}

/** The member's change (`after` null: it leaves), its sync record made (`fresh`) or removed with it. */
function changeMember(s: ControllerState, net: NetworkState, id: string, after: MemberRecord | null, fresh = false): number {
  const before = net.members.get(id) ?? null;
  return commit(s, net, { version: 0, kind: 'member', id, before, after }, () => {
    if (after) {
      net.putMember(after);
      s.store.putMember(net.record.name, after);
      if (fresh) {
        net.sync.set(id, newSync());
        s.store.putSync(net.record.name, id, net.sync.get(id)!);
      }
    } else {
      net.deleteMember(id);
      net.sync.delete(id);
      s.store.deleteMember(net.record.name, id);
      s.store.deleteSync(net.record.name, id);
    }
  });
}

export function sorted(xs: string[]): string[] {
  return [...new Set(xs)].sort();
}

/** The next address of the network's private range. */
function allocate(n: NetworkRecord): string {
  const [base, bits] = n.privateRange.split('/');
  const parts = (base ?? '100.96.0.0').split('.').map(Number);
  const start = ((parts[0]! << 24) | (parts[1]! << 16) | (parts[2]! << 8) | parts[3]!) >>> 0;
  const size = 2 ** (32 - Number(bits ?? 16));
  if (n.nextHost >= size - 1) throw usage(`the private range ${n.privateRange} is full`);
  const a = (start + n.nextHost++) >>> 0;
  return `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`;
}

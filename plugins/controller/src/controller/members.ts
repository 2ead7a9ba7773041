/**
 * Changes to a network's memberships: a node joins (by itself or with a token), leaves, is renamed,
 * and its key, tags, mode and modules change. Each is one version of the network (log.ts).
 */
import { isDeepStrictEqual } from 'node:util';
import { type Mode } from '@meshp/core';
import { NODE_LIFETIME_S, isControlNode, type MemberRecord, type NetworkRecord, type NetworkState } from '@meshp/core/delta';
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
    ...(input.expiresAt ? { expiresAt: input.expiresAt } : {}),
    ...(input.renewedAt ? { renewedAt: input.renewedAt } : {}),
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
    // An enrolled node's credential lives the network's node lifetime (ADR 0041).
    join(s, t.network, {
      ...input,
      mode: t.mode,
      tags: t.tags,
      ...expiryAtEnrolment(s, t.network, t.tags),
      ...(t.ephemeralSeconds ? { ephemeralSeconds: t.ephemeralSeconds } : {}),
    });
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

// ---- expiry (issue 28, ADR 0041) ------------------------------------------------------------------

/** The node lifetime of the network, in seconds (NODE_LIFETIME_S when it sets none). */
export function nodeLifetime(s: ControllerState, network: string): number {
  return s.net(network).record.nodeLifetimeSeconds ?? NODE_LIFETIME_S;
}

/** Bounds of a node lifetime or a renewal's term: ten seconds (a test's) to ten years. */
export const LIFETIME_BOUNDS = { min: 10, max: 10 * 365 * 86400 };

function checkTerm(seconds: number, what: string): void {
  if (!Number.isInteger(seconds) || seconds < LIFETIME_BOUNDS.min || seconds > LIFETIME_BOUNDS.max)
    throw usage(`${what} is a whole number of seconds from ${LIFETIME_BOUNDS.min} to ${LIFETIME_BOUNDS.max} (ten years), not ${seconds}`);
}

/** The network's node lifetime from now on (each enrolment and renewal after it): no version, no delta (nothing in any view moves). */
export function setNodeLifetime(s: ControllerState, network: string, seconds: number): number {
  checkTerm(seconds, 'a node lifetime');
  const net = s.net(network);
  const before = nodeLifetime(s, network);
  s.store.transaction(() => {
    net.record.nodeLifetimeSeconds = seconds;
    s.store.putNetwork(net.record);
  });
  return before;
}

/** The expiry a node enrolled now gets; none for a control-node (expired, it would cut every agent off). */
export function expiryAtEnrolment(s: ControllerState, network: string, tags: readonly string[]): Pick<MemberRecord, 'expiresAt' | 'renewedAt'> {
  if (isControlNode(tags)) return {};
  const now = s.now();
  return { expiresAt: new Date(Date.parse(now) + nodeLifetime(s, network) * 1000).toISOString(), renewedAt: now };
}

function refuseControlNode(m: MemberRecord, what: string): void {
  if (isControlNode(m.tags)) throw usage(`${m.id} is the control-node: its credential does not expire, so it is neither expired nor renewed (${what})`);
}

/** The node expired now: out of every peer's view in this one version, still a member. Expired already: nothing changes. */
export function expireNode(s: ControllerState, network: string, id: string): number {
  const net = s.net(network);
  const m = s.member(net, id);
  refuseControlNode(m, 'node expire');
  if (m.expiredAt) return net.version;
  const now = s.now();
  return changeMember(s, net, id, { ...structuredClone(m), expiresAt: now, expiredAt: now });
}

/** The node's credential renewed for `seconds` from now (the network's lifetime when absent); an expired node is back in its peers' views in this one version. */
export function renewNode(s: ControllerState, network: string, id: string, seconds?: number): number {
  const net = s.net(network);
  const m = s.member(net, id);
  refuseControlNode(m, 'node renew');
  const term = seconds ?? nodeLifetime(s, network);
  checkTerm(term, "a renewal's term");
  const now = s.now();
  const after: MemberRecord = { ...structuredClone(m), expiresAt: new Date(Date.parse(now) + term * 1000).toISOString(), renewedAt: now };
  delete after.expiredAt;
  return changeMember(s, net, id, after);
}

/** When the agent asks its renewal: a third of its term (renewedAt → expiresAt) before the expiry; null: it never expires. */
export function renewAtOf(m: MemberRecord): string | null {
  if (!m.expiresAt) return null;
  const end = Date.parse(m.expiresAt);
  const start = m.renewedAt ? Date.parse(m.renewedAt) : end - NODE_LIFETIME_S * 1000;
  return new Date(end - Math.max(0, end - start) / 3).toISOString();
}

/**
 * Every node whose expiry has come and is not yet recorded expired, recorded so: one version per
 * network (one 'members' change), so each peer drops all of them in one delta. Answers them by network.
 */
export function expireDue(s: ControllerState): { network: string; nodes: string[]; version: number }[] {
  const now = Date.parse(s.now());
  const out: { network: string; nodes: string[]; version: number }[] = [];
  for (const net of s.networks.values()) {
    const due = [...net.members.values()].filter((m) => m.expiresAt && !m.expiredAt && Date.parse(m.expiresAt) <= now && !isControlNode(m.tags));
    if (due.length === 0) continue;
    const at = new Date(now).toISOString();
    const changes = due.map((m) => ({ id: m.id, before: m, after: { ...structuredClone(m), expiredAt: at } }));
    const version = commit(s, net, { version: 0, kind: 'members', changes }, () => {
      for (const c of changes) {
        net.putMember(c.after);
        s.store.putMember(net.record.name, c.after);
      }
    });
    out.push({ network: net.record.name, nodes: due.map((m) => m.id).sort(), version });
  }
  return out;
}

/** The earliest expiry not yet recorded (ms since the epoch), or null. */
export function nextExpiry(s: ControllerState): number | null {
  let next: number | null = null;
  for (const net of s.networks.values())
    for (const m of net.members.values())
      if (m.expiresAt && !m.expiredAt) {
        const t = Date.parse(m.expiresAt);
        if (next === null || t < next) next = t;
      }
  return next;
}

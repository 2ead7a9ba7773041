/**
 * Between the transport contract's messages (core) and the generated ones (ts-proto). Mostly the
 * same shapes, held so at compile time by @meshp/protocol's guards (lib/protocol/src/mirrors.ts): the
 * state delta passes as it is; modes, lifecycle states and openings need a word, and a oneof is an
 * object with one key set.
 */
import type {
  AgentMessage,
  ControllerMessage,
  EnrolResult,
  LifecycleReport,
  LifecycleState,
  Opening,
  PeerHandshake,
  ReportMessage,
  ResolverReport,
  ForwardingReport,
  UntakePreviewReport,
} from '@meshp/core';
import { WIRE_MODE, modeFromWire, modeToWire } from '@meshp/core/delta';
import { malformed } from '@meshp/core/util';
import type {
  EnrolResponse,
  Lifecycle,
  PeerHandshake as WirePeerHandshake,
  PlannedOpening,
  Report,
  ResolverStatus,
  RouterForwarding,
  SyncRequest,
  SyncResponse,
} from '@meshp/protocol';

export function enrolToWire(r: EnrolResult): EnrolResponse {
  return { network: r.network, node: r.node, credential: r.credential, mode: modeToWire(r.mode), addresses: [...r.addresses] };
}

export function enrolFromWire(r: EnrolResponse): EnrolResult {
  return { network: r.network, node: r.node, credential: r.credential, mode: modeFromWire(r.mode), addresses: [...r.addresses] };
}

function reportToWire(r: ReportMessage): Report {
  return {
    appliedVersion: r.appliedVersion,
    mode: modeToWire(r.mode),
    firewallKind: r.firewallKind,
    firewallActive: r.firewallActive,
    resources: r.resources.map((x) => ({ key: x.key, kind: x.kind, module: x.module, state: x.state, reason: x.reason ?? '' })),
    at: r.at,
    applied: r.applied ?? [],
    listening: (r.listening ?? []).map((l) => ({ ...l, pid: l.pid ?? 0, established: l.established ?? 0 })),
    published: r.published ?? [],
    firewallTables: r.firewallTables ?? [],
    firewallConfigFile: r.firewallConfigFile ?? '',
    ...(r.lifecycle ? { lifecycle: lifecycleToWire(r.lifecycle) } : {}),
    reach: (r.reach ?? []).map((x) => ({ ...x, from: [...x.from] })),
    ...(r.reconcile ? { reconcile: { ...r.reconcile } } : {}),
    ...(r.tunnelKey ? { tunnelKey: r.tunnelKey } : {}),
    ...(r.tunnelInterface ? { tunnelInterface: r.tunnelInterface } : {}),
    ...(r.tunnelError ? { tunnelError: r.tunnelError } : {}),
    pluginOpenings: (r.pluginOpenings ?? []).map((o) => ({
      id: o.id,
      module: o.module,
      port: o.port,
      protocol: o.protocol,
      from: [...o.from],
      path: o.path,
      action: o.action,
    })),
    peerHandshakes: (r.peerHandshakes ?? []).map((h) => ({ ...h, endpoint: h.endpoint ?? '', path: h.path ?? '' })),
    handshakesReported: r.peerHandshakes !== undefined,
    ...(r.dns ? { dns: resolverToWire(r.dns) } : {}),
    advertisedRoutes: [...(r.advertisedRoutes ?? [])],
    relayedAddress: r.relayedAddress ?? '',
    relayId: r.relayId ?? '',
    ...(r.forwarding ? { forwarding: forwardingToWire(r.forwarding) } : {}),
    pluginChanges: (r.pluginChanges ?? []).map((c) => ({ ...c })),
    untakePreviews: (r.untakePreviews ?? []).map(untakePreviewCopy),
    untakes: (r.untakes ?? []).map((u) => ({ ...u, release: u.release ?? false })),
    releasePreviews: (r.releasePreviews ?? []).map(untakePreviewCopy),
  };
}

/** A peer's handshake from the wire: '' endpoint or path (an older agent) is absent; a path word not known is dropped. */
function handshakeFromWire(h: WirePeerHandshake): PeerHandshake {
  return {
    peer: h.peer,
    publicKey: h.publicKey,
    latestHandshake: h.latestHandshake,
    ...(h.endpoint ? { endpoint: h.endpoint } : {}),
    ...(h.path === 'direct' || h.path === 'relayed' || h.path === 'trying' ? { path: h.path } : {}),
  };
}

const untakePreviewCopy = (p: UntakePreviewReport): UntakePreviewReport => ({
  module: p.module,
  id: p.id,
  steps: p.steps.map((x) => ({ ...x })),
  blocks: p.blocks.map((x) => ({ ...x })),
});

const LIFECYCLE_STATES: Record<LifecycleState, true> = { adopted: true, flipping: true, converged: true, refused: true, returning: true };

function isLifecycleState(state: string): state is LifecycleState {
  return Object.hasOwn(LIFECYCLE_STATES, state);
}

export function lifecycleToWire(l: LifecycleReport): Lifecycle {
  return { state: l.state, previewId: l.previewId, steps: [...l.steps], code: l.code ?? '', message: l.message ?? '', at: l.at };
}

/** A state this end does not know is left out rather than guessed. */
export function lifecycleFromWire(l: Lifecycle | undefined): LifecycleReport | undefined {
  if (!l || !isLifecycleState(l.state)) return undefined;
  return { state: l.state, previewId: l.previewId, steps: [...l.steps], ...(l.code ? { code: l.code, message: l.message } : {}), at: l.at };
}

function reportFromWire(r: Report): ReportMessage {
  // A resource's kind and state pass as the agent sent them, unchecked (as before the guards): a
  // check would leave out what a later agent reports, a change of behaviour of its own.
  return {
    appliedVersion: r.appliedVersion,
    mode: r.mode === WIRE_MODE.ADOPTED ? 'adopted' : 'converged',
    firewallKind: r.firewallKind,
    firewallActive: r.firewallActive,
    resources: r.resources.map((x) => ({
      key: x.key,
      kind: x.kind as ReportMessage['resources'][number]['kind'],
      module: x.module,
      state: x.state as ReportMessage['resources'][number]['state'],
      ...(x.reason ? { reason: x.reason } : {}),
    })),
    at: r.at,
    applied: r.applied,
    listening: r.listening.map(({ pid, established, ...l }) => ({ ...l, ...(pid ? { pid } : {}), ...(established ? { established } : {}) })),
    published: r.published,
    firewallTables: r.firewallTables,
    ...(r.firewallConfigFile ? { firewallConfigFile: r.firewallConfigFile } : {}),
    ...(lifecycleFromWire(r.lifecycle) ? { lifecycle: lifecycleFromWire(r.lifecycle)! } : {}),
    // An older agent sends none: the controller's preview then says unknown.
    ...(r.reach.length ? { reach: r.reach.map((x) => ({ ...x, from: [...x.from] })) } : {}),
    ...(r.reconcile && (r.reconcile.result === 'ok' || r.reconcile.result === 'refused') ? { reconcile: { ...r.reconcile, result: r.reconcile.result } } : {}),
    ...(r.tunnelKey ? { tunnelKey: r.tunnelKey } : {}),
    ...(r.tunnelInterface ? { tunnelInterface: r.tunnelInterface } : {}),
    ...(r.tunnelError ? { tunnelError: r.tunnelError } : {}),
    ...(r.pluginOpenings.length ? { pluginOpenings: r.pluginOpenings.flatMap(openingFromWire) } : {}),
    // An older agent, or one without a tunnel, says nothing: not "no peers".
    ...(r.handshakesReported ? { peerHandshakes: r.peerHandshakes.map(handshakeFromWire) } : {}),
    ...(r.dns ? { dns: resolverFromWire(r.dns) } : {}),
    ...(r.advertisedRoutes.length ? { advertisedRoutes: [...r.advertisedRoutes] } : {}),
    ...(r.relayedAddress ? { relayedAddress: r.relayedAddress, relayId: r.relayId } : {}),
    ...(r.forwarding && forwardingFromWire(r.forwarding) ? { forwarding: forwardingFromWire(r.forwarding)! } : {}),
    ...(r.pluginChanges.length ? { pluginChanges: r.pluginChanges.map((c) => ({ ...c })) } : {}),
    ...(r.untakePreviews.length ? { untakePreviews: r.untakePreviews.map(untakePreviewCopy) } : {}),
    ...(r.releasePreviews.length ? { releasePreviews: r.releasePreviews.map(untakePreviewCopy) } : {}),
    // An outcome this end does not know is left out, not guessed.
    ...(r.untakes.length
      ? {
          untakes: r.untakes.flatMap((u) =>
            u.result === 'done' || u.result === 'refused'
              ? [
                  {
                    module: u.module,
                    previewId: u.previewId,
                    result: u.result as 'done' | 'refused',
                    code: u.code,
                    message: u.message,
                    at: u.at,
                    ...(u.release ? { release: true } : {}),
                  },
                ]
              : [],
          ),
        }
      : {}),
  };
}

export function resolverToWire(d: ResolverReport): ResolverStatus {
  return { ...d, upstreams: [...d.upstreams], lastError: d.lastError ?? '' };
}

/** The resolver's status as the wire carries it; a list source this end does not know is `none`, not guessed. */
export function resolverFromWire(d: ResolverStatus): ResolverReport {
  const from = d.upstreamsFrom === 'component' || d.upstreamsFrom === 'found' ? d.upstreamsFrom : 'none';
  return { ...d, upstreams: [...d.upstreams], upstreamsFrom: from, lastError: d.lastError || null };
}

const V4 = 'net.ipv4.ip_forward';
const V6 = 'net.ipv6.conf.all.forwarding';
const FORWARDING_STATES: Record<ForwardingReport['state'], true> = { none: true, 'found-on': true, held: true, owned: true };

export function forwardingToWire(f: ForwardingReport): RouterForwarding {
  return {
    state: f.state,
    ipv4: f.values[V4] ?? '',
    ipv6: f.values[V6] ?? '',
    originalIpv4: f.original[V4] ?? '',
    originalIpv6: f.original[V6] ?? '',
    reason: f.reason,
    needed: [...f.needed],
  };
}

/** A state this end does not know is left out, not guessed. */
export function forwardingFromWire(f: RouterForwarding): ForwardingReport | undefined {
  if (!Object.hasOwn(FORWARDING_STATES, f.state)) return undefined;
  const pick = (a: string, b: string) => Object.fromEntries([...(a ? [[V4, a]] : []), ...(b ? [[V6, b]] : [])]) as Record<string, string>;
  return {
    state: f.state as ForwardingReport['state'],
    values: pick(f.ipv4, f.ipv6),
    original: pick(f.originalIpv4, f.originalIpv6),
    reason: f.reason,
    needed: [...f.needed],
  };
}

/** A plugin's opening as the agent reported it; one of a protocol, path or action this end does not know is left out, not guessed. */
function openingFromWire(o: PlannedOpening): Opening[] {
  if ((o.protocol !== 'tcp' && o.protocol !== 'udp') || (o.path !== 'incoming' && o.path !== 'forwarded') || (o.action !== 'accept' && o.action !== 'drop'))
    return [];
  return [{ id: o.id, module: o.module, port: o.port, protocol: o.protocol, from: [...o.from], path: o.path, action: o.action }];
}

export function agentToWire(m: AgentMessage): SyncRequest {
  if ('hello' in m)
    return {
      hello: {
        ...m.hello,
        versionSignature: m.hello.versionSignature ?? new Uint8Array(0),
        expiryAware: m.hello.expiryAware ?? false,
        exitNode: m.hello.exitNode ?? '',
      },
    };
  if ('ack' in m) return { ack: m.ack };
  if ('resync' in m) return { resync: m.resync };
  if ('renew' in m) return { renew: {} };
  return { report: reportToWire(m.report) };
}

export function agentFromWire(m: SyncRequest): AgentMessage {
  if (m.hello) return { hello: m.hello };
  if (m.ack) return { ack: m.ack };
  if (m.resync) return { resync: m.resync };
  if (m.report) return { report: reportFromWire(m.report) };
  if (m.renew) return { renew: {} };
  throw malformed('an empty message on the Sync stream');
}

export function controllerToWire(m: ControllerMessage): SyncResponse {
  if ('challenge' in m) return { challenge: { nonce: m.challenge } };
  if ('error' in m) return { error: m.error };
  if ('expiry' in m) return { expiry: { ...m.expiry } };
  if ('rekey' in m) return { rekey: { ...m.rekey } };
  const d = { ...m.delta, stateHash: m.delta.stateHash ?? '', versionSignature: m.delta.versionSignature ?? new Uint8Array(0) };
  // A declaration made without the preview id (an older computation) goes out with it empty.
  if (d.declaration && (d.declaration.convergePreviewId === undefined || d.declaration.untakes === undefined || d.declaration.releases === undefined))
    return {
      delta: {
        ...d,
        declaration: {
          ...d.declaration,
          convergePreviewId: d.declaration.convergePreviewId ?? '',
          untakes: d.declaration.untakes ?? [],
          releases: d.declaration.releases ?? [],
        },
      },
    };
  return { delta: d };
}

export function controllerFromWire(m: SyncResponse): ControllerMessage {
  if (m.challenge) return { challenge: m.challenge.nonce };
  if (m.error) return { error: m.error };
  if (m.delta) return { delta: m.delta };
  if (m.expiry) return { expiry: { expiresAt: m.expiry.expiresAt, renewAt: m.expiry.renewAt } };
  if (m.rekey) return { rekey: { id: m.rekey.id } };
  throw malformed('an empty message on the Sync stream');
}

/**
 * Between the transport contract's messages (core) and the generated ones (ts-proto). Mostly the
 * same shapes; modes and resource states need a word, and a oneof is an object with one key set.
 */
import { MeshpError, modeFromWire, modeToWire, type AgentMessage, type ControllerMessage, type EnrolResult, type ReportMessage, type StateDelta } from '@meshp/core';
import type { EnrolResponse, Report, StateDelta as WireDelta, SyncRequest, SyncResponse } from './gen/meshp/v1/control.js';

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
    listening: r.listening ?? [],
    published: r.published ?? [],
  };
}

function reportFromWire(r: Report): ReportMessage {
  return {
    appliedVersion: r.appliedVersion,
    mode: r.mode === 1 ? 'adopted' : 'converged',
    firewallKind: r.firewallKind,
    firewallActive: r.firewallActive,
    resources: r.resources.map((x) => ({ key: x.key, kind: x.kind as ReportMessage['resources'][number]['kind'], module: x.module, state: x.state as ReportMessage['resources'][number]['state'], ...(x.reason ? { reason: x.reason } : {}) })),
    at: r.at,
    applied: r.applied,
    listening: r.listening,
    published: r.published,
  };
}

export function agentToWire(m: AgentMessage): SyncRequest {
  if ('hello' in m) return { hello: m.hello };
  if ('ack' in m) return { ack: m.ack };
  if ('resync' in m) return { resync: m.resync };
  return { report: reportToWire(m.report) };
}

export function agentFromWire(m: SyncRequest): AgentMessage {
  if (m.hello) return { hello: m.hello };
  if (m.ack) return { ack: m.ack };
  if (m.resync) return { resync: m.resync };
  if (m.report) return { report: reportFromWire(m.report) };
  throw new MeshpError('MESHP_USAGE', 'an empty message on the Sync stream');
}

export function controllerToWire(m: ControllerMessage): SyncResponse {
  if ('challenge' in m) return { challenge: { nonce: m.challenge } };
  if ('error' in m) return { error: m.error };
  return { delta: m.delta as WireDelta };
}

export function controllerFromWire(m: SyncResponse): ControllerMessage {
  if (m.challenge) return { challenge: m.challenge.nonce };
  if (m.error) return { error: m.error };
  if (m.delta) return { delta: m.delta as StateDelta };
  throw new MeshpError('MESHP_DELTA_INVALID', 'an empty message on the Sync stream');
}

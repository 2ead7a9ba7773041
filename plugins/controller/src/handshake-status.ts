/**
 * Whether a tunnel member's tunnel carries anything, from what its agent observed: the latest
 * WireGuard handshake with each peer. A member none of whose peers has handshaked within the limit
 * is `no-handshake`; a member whose agent does not report handshakes is `unverified` (never `ok` by
 * assumption); a member with no peer configured is not judged.
 *
 * Ages are computed without comparing clocks: the agent says how old the newest handshake was when
 * it made its report (both by its clock), the controller adds the time since it received it (by its own).
 */
import { type ReportMessage } from '@meshp/core';
import type { ReportedHandshakes, ReportedPeerPath } from '@meshp/core/delta';
import { usage } from '@meshp/core/util';

/**
 * The default limit, in seconds: WireGuard's REJECT_AFTER_TIME (180 s: past it a session's keys are
 * refused, so nothing flows without a new handshake) plus the tunnel's default persistent keepalive
 * (25 s: an idle tunnel's keepalive starts the next handshake at most that late). A healthy tunnel
 * with keepalive rekeys every 120-150 s, and the agent reports a newer handshake at most 30 s
 * (HANDSHAKE_REPORT_AFTER_S) and one reconcile interval late. `controller serve --handshake-stale`.
 */
export const HANDSHAKE_STALE_SECONDS = 205;

/** `--handshake-stale` as given, or MESHP_USAGE: a whole number of seconds of at least 1. */
export function checkHandshakeStale(s: number): number {
  if (!Number.isInteger(s) || s < 1) throw usage(`--handshake-stale must be a whole number of seconds of at least 1, not ${s}`);
  return s;
}

/** What the controller keeps of a report's handshakes; `before` carries since when the node has had peers. */
export function reportedHandshakes(r: ReportMessage, before: ReportedHandshakes | undefined, receivedAt: string): ReportedHandshakes | undefined {
  const hs = r.peerHandshakes;
  if (!hs) return undefined;
  const newest = Math.max(0, ...hs.map((h) => h.latestHandshake));
  const madeAt = Date.parse(r.at) / 1000;
  const ageAtReport = newest > 0 && Number.isFinite(madeAt) ? Math.max(0, madeAt - newest) : -1;
  const peersSince = hs.length > 0 && before && before.peers > 0 ? before.peersSince : receivedAt;
  const was = new Map((before?.paths ?? []).map((p) => [p.peer, p.since]));
  const paths = hs.map((h): ReportedPeerPath => ({
    peer: h.peer,
    endpoint: h.endpoint ?? '',
    path: h.path ?? '',
    ageAtReport: h.latestHandshake > 0 && Number.isFinite(madeAt) ? Math.max(0, madeAt - h.latestHandshake) : -1,
    since: was.get(h.peer) ?? receivedAt,
  }));
  return { peers: hs.length, ageAtReport, receivedAt, peersSince, paths };
}

/** One peer of a node now (PeerPath on the wire): `connected` only on a handshake within the limit. */
export interface PeerPathView {
  peer: string;
  endpoint: string;
  path: string;
  /** Seconds since this peer's latest handshake, now; -1: never. */
  ageSeconds: number;
  state: 'connected' | 'stale' | 'never' | 'waiting';
}

/** Each reported peer's path now, by name. */
export function pathsNow(h: ReportedHandshakes, now: number, staleAfterSeconds: number): PeerPathView[] {
  const since = Math.max(0, (now - Date.parse(h.receivedAt)) / 1000);
  return (h.paths ?? []).map((p) => {
    const ageSeconds = p.ageAtReport < 0 ? -1 : Math.floor(p.ageAtReport + since);
    const waited = Math.max(0, (now - Date.parse(p.since)) / 1000);
    const state = ageSeconds >= 0 ? (ageSeconds <= staleAfterSeconds ? 'connected' : 'stale') : waited <= staleAfterSeconds ? 'waiting' : 'never';
    return { peer: p.peer, endpoint: p.endpoint, path: p.path, ageSeconds, state };
  });
}

/** What node list, show, doctor and /metrics say of it (NodeHandshakes on the wire). */
export interface NodeHandshakes {
  /** false: its agent does not report handshakes. */
  reported: boolean;
  peers: number;
  /** Seconds since the newest handshake, now; -1: none yet (or not reported). */
  newestAgeSeconds: number;
  staleAfterSeconds: number;
  /** issue 27: each peer's path, by name ([] from an agent before it). */
  paths: PeerPathView[];
}

export function handshakesNow(h: ReportedHandshakes | undefined, now: number, staleAfterSeconds: number): NodeHandshakes {
  if (!h) return { reported: false, peers: 0, newestAgeSeconds: -1, staleAfterSeconds, paths: [] };
  const since = Math.max(0, (now - Date.parse(h.receivedAt)) / 1000);
  return {
    reported: true,
    peers: h.peers,
    newestAgeSeconds: h.ageAtReport < 0 ? -1 : Math.floor(h.ageAtReport + since),
    staleAfterSeconds,
    paths: pathsNow(h, now, staleAfterSeconds),
  };
}

/**
 * A tunnel member some of whose peers it cannot reach (issue 27): a handshake with one peer or more
 * goes on (else it is no-handshake), and these had none within the limit. Each named, with the
 * endpoint its device tries.
 */
export function unreachablePeers(view: NodeHandshakes): { status: 'peer-unreachable'; detail: string } | null {
  const lost = view.paths.filter((p) => p.state === 'stale' || p.state === 'never');
  if (lost.length === 0) return null;
  const one = (p: PeerPathView) =>
    `${p.peer} (${p.state === 'never' ? 'never handshaked' : `last handshake ${duration(p.ageSeconds)} ago`}; ${p.endpoint ? `endpoint ${p.endpoint}` : 'no endpoint'})`;
  return {
    status: 'peer-unreachable',
    detail: `cannot reach ${lost.length} of its ${view.paths.length} tunnel peers: ${lost.map(one).join(', ')} (limit ${view.staleAfterSeconds} s)`,
  };
}

/** The reason a tunnel member stands out, or null. `reported` false and the agent has not reported at all: pending says it. */
export function handshakeReason(
  h: ReportedHandshakes | undefined,
  view: NodeHandshakes,
  now: number,
  hasReported: boolean,
): { status: 'no-handshake' | 'unverified'; detail: string } | null {
  if (!h) {
    if (!hasReported) return null;
    return {
      status: 'unverified',
      detail:
        'its agent does not report tunnel handshakes (an older agent, or a tunnel device it could not read): whether its tunnel carries traffic was not observed',
    };
  }
  if (h.peers === 0) return null;
  const limit = view.staleAfterSeconds;
  const peers = `${h.peers} tunnel peer${h.peers === 1 ? '' : 's'}`;
  if (view.newestAgeSeconds >= 0) {
    if (view.newestAgeSeconds <= limit) return null;
    return { status: 'no-handshake', detail: `no handshake with any of its ${peers} for ${duration(view.newestAgeSeconds)} (limit ${limit} s)` };
  }
  const waited = Math.floor(Math.max(0, (now - Date.parse(h.peersSince)) / 1000));
  if (waited <= limit) return null;
  return { status: 'no-handshake', detail: `no handshake with any of its ${peers} yet, in the ${duration(waited)} it has reported them (limit ${limit} s)` };
}

/** 228 → "3m48s". */
export function duration(seconds: number): string {
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/**
 * A peer of the view as a WireGuard peer: its tunnel key, its mesh addresses as allowed IPs (a bare
 * address is a host route), its usable endpoints (the first configured, the others tried in turn:
 * candidates.ts), the tunnel's keepalive. And the UAPI lines
 * that add, change or remove it: a delta becomes one `set=1` with only the peers it changed.
 */
import type { Peer } from '@meshp/core';
import { isTunnelKey, keyToHex } from './keys.js';
import { RELAY_CANDIDATE_PREFIX } from '@meshp/core/delta';

/** WireGuard's default port: the port of an endpoint given as a bare address. */
export const DEFAULT_PORT = 51820;

export interface PeerConfig {
  publicKey: string;
  allowedIps: string[];
  endpoint?: string;
  /** Every usable endpoint of the peer, in the view's order, once each (issue 27); `endpoint` is one of them. */
  candidates?: string[];
  /** issue 27: the peer's relayed address on its relay allocation (its `relay:` endpoint), tried after every direct candidate (relay-paths.ts). */
  relayed?: string;
  keepalive: number;
}

export function hostRoute(address: string): string {
  if (address.includes('/')) return address;
  return address.includes(':') ? `${address}/128` : `${address}/32`;
}

/** `IP:PORT`, `[IPv6]:PORT`, or a bare address (the default port). Anything else: not usable. */
export function endpointOf(text: string): string | undefined {
  const v4 = /^(\d{1,3}(?:\.\d{1,3}){3})(?::(\d{1,5}))?$/.exec(text);
  if (v4) return `${v4[1]}:${v4[2] ?? DEFAULT_PORT}`;
  const v6 = /^\[([0-9a-fA-F:.]+)\]:(\d{1,5})$/.exec(text);
  if (v6) return `[${v6[1]}]:${v6[2]}`;
  if (/^[0-9a-fA-F:]+$/.test(text) && text.includes(':')) return `[${text}]:${DEFAULT_PORT}`;
  return undefined;
}

/** The peer's relayed address from its view entry's endpoints (`relay:IP:PORT`, issue 27); undefined: none. */
export function relayedOf(endpoints: readonly string[]): string | undefined {
  for (const e of endpoints) if (e.startsWith(RELAY_CANDIDATE_PREFIX)) return endpointOf(e.slice(RELAY_CANDIDATE_PREFIX.length));
  return undefined;
}

/**
 * Null when the peer has no tunnel key (it enrolled without a tunnel plugin): nothing to configure.
 * `routed`: the prefixes of the route groups it is the primary of (routes.ts), after its own addresses.
 */
export function peerConfig(peer: Peer, keepalive: number, routed: readonly string[] = []): PeerConfig | null {
  const key = peer.tunnelKey ?? '';
  if (!isTunnelKey(key)) return null;
  const candidates = [...new Set(peer.endpoints.map(endpointOf).filter((e): e is string => e !== undefined))];
  const endpoint = candidates[0];
  const relayed = relayedOf(peer.endpoints);
  return {
    publicKey: key,
    allowedIps: [...peer.addresses.map(hostRoute), ...routed],
    ...(endpoint ? { endpoint } : {}),
    ...(candidates.length > 1 ? { candidates } : {}),
    ...(relayed ? { relayed } : {}),
    keepalive,
  };
}

export function sameConfig(a: PeerConfig | undefined, b: PeerConfig): boolean {
  return !!a && a.publicKey === b.publicKey && a.endpoint === b.endpoint && a.keepalive === b.keepalive && a.allowedIps.join(',') === b.allowedIps.join(',');
}

export function upsertLines(p: PeerConfig): string[] {
  const lines = [`public_key=${keyToHex(p.publicKey)}`, 'replace_allowed_ips=true', ...p.allowedIps.map((a) => `allowed_ip=${a}`)];
  if (p.endpoint) lines.push(`endpoint=${p.endpoint}`);
  lines.push(`persistent_keepalive_interval=${p.keepalive}`);
  return lines;
}

export function removeLines(publicKey: string): string[] {
  return [`public_key=${keyToHex(publicKey)}`, 'remove=true'];
}

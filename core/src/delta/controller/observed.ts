/**
 * A node's endpoints as its peers are given them: what the agent was told (`--endpoint`), then the
 * address the controller saw its Sync stream come from, on the node's tunnel port. The observed
 * address is a hint for nodes with no endpoint of their own (or a stale one); it is not NAT
 * traversal: behind NAT it is the NAT's address, and the NAT must forward the tunnel's port.
 *
 * Issue 27: before it, the node's mapping as a control-node's WireGuard device sees it (the source of
 * the node's last authenticated tunnel packet: behind an endpoint-independent NAT, the mapping every
 * peer can reach once both send). The tunnel tries each candidate in turn (tunnel-wireguard candidates.ts).
 */
import type { MemberRecord } from './records.js';
import { RELAY_CANDIDATE_PREFIX } from './relays.js';

/** `IP:PORT` (`[IPv6]:PORT`) for gRPC's peer string (`ipv4:10.0.0.1:40000`, `ipv6:[::1]:40000`, `10.0.0.1:40000`); null for loopback or what cannot be read. */
export function observedEndpoint(peer: string, port: number): string | null {
  const m = /^(?:ipv[46]:)?(?:\[([^\]]+)\]|([^:]+)):\d+$/.exec(peer.trim());
  let ip = m?.[1] ?? m?.[2] ?? '';
  ip = ip.replace(/^::ffff:(\d+\.\d+\.\d+\.\d+)$/i, '$1').replace(/%.*$/, '');
  if (!ip || !Number.isInteger(port) || port < 1 || port > 65535) return null;
  if (/^127\./.test(ip) || ip === '::1' || ip === '0.0.0.0' || ip === '::' || /^fe80:/i.test(ip)) return null;
  return ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`;
}

const hostOf = (endpoint: string): string => /^\[([^\]]+)\]/.exec(endpoint)?.[1] ?? endpoint.replace(/:\d+$/, '');

/**
 * The told endpoints first (the tunnel starts on the first), then the mapping a control-node saw unless
 * it is told already, then the observed one unless its address is told already or it is the mapping's.
 */
export function endpointsOf(m: Pick<MemberRecord, 'endpoints' | 'observedEndpoint' | 'mappedEndpoint' | 'relayedEndpoint'>): string[] {
  const out = [...m.endpoints];
  const mapped = m.mappedEndpoint;
  if (mapped && !out.includes(mapped)) out.push(mapped);
  const seen = m.observedEndpoint;
  if (seen && !m.endpoints.some((e) => hostOf(e) === hostOf(seen)) && !out.includes(seen)) out.push(seen);
  // issue 27: the node's relayed address last, marked (relays.ts): tried only after every direct one.
  if (m.relayedEndpoint) out.push(`${RELAY_CANDIDATE_PREFIX}${m.relayedEndpoint}`);
  return out;
}

/** A handshake a control-node reported, fresh enough to trust its endpoint as the peer's mapping (REJECT_AFTER_TIME). */
export const MAPPING_FRESH_S = 180;

/**
 * The mappings a control-node's report teaches (issue 27): each peer it has a fresh, direct handshake
 * with, under the key the peer is enrolled with (WireGuard updates an endpoint only on an authenticated
 * packet), whose mapping is not the one stored. `reportAt`: the report's time (the agent's clock, as
 * its handshakes are).
 */
export function mappingsOf(
  handshakes: readonly { peer: string; publicKey: string; latestHandshake: number; endpoint?: string; path?: string }[],
  reportAt: string,
  member: (id: string) => Pick<MemberRecord, 'tunnelKey' | 'mappedEndpoint'> | undefined,
): { peer: string; endpoint: string }[] {
  const at = Date.parse(reportAt) / 1000;
  if (!Number.isFinite(at)) return [];
  const out: { peer: string; endpoint: string }[] = [];
  for (const h of handshakes) {
    if (!h.endpoint || h.path !== 'direct' || h.latestHandshake <= 0 || at - h.latestHandshake > MAPPING_FRESH_S) continue;
    const m = member(h.peer);
    if (!m || m.tunnelKey !== h.publicKey || m.mappedEndpoint === h.endpoint) continue;
    out.push({ peer: h.peer, endpoint: h.endpoint });
  }
  return out;
}

/**
 * A node's endpoints as its peers are given them: what the agent was told (`--endpoint`), then the
 * address the controller saw its Sync stream come from, on the node's tunnel port. The observed
 * address is a hint for nodes with no endpoint of their own (or a stale one); it is not NAT
 * traversal: behind NAT it is the NAT's address, and the NAT must forward the tunnel's port.
 */
import type { MemberRecord } from './records.js';

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

/** The told endpoints first (the tunnel uses the first), the observed one after unless its address is told already. */
export function endpointsOf(m: Pick<MemberRecord, 'endpoints' | 'observedEndpoint'>): string[] {
  const told = [...m.endpoints];
  const seen = m.observedEndpoint;
  if (!seen || told.some((e) => hostOf(e) === hostOf(seen))) return told;
  return [...told, seen];
}

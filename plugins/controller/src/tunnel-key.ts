/**
 * A node's WireGuard public key as the controller accepts it: 32 bytes in base64, and held by no
 * other node of the network — two peers with one key would take each other's allowed IPs on every
 * interface that configures both.
 */
import { MeshpError } from '@meshp/core';
import type { MemberRecord } from '@meshp/core/delta';
import { usage } from '@meshp/core/util';

const KEY = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

export function isTunnelKey(text: string): boolean {
  return KEY.test(text);
}

/** Refuses a key that is not a Curve25519 public key, or that another member (not `self`) holds. */
export function checkTunnelKey(tunnelKey: string, members: Iterable<MemberRecord>, self: string): void {
  if (!isTunnelKey(tunnelKey)) throw usage('the tunnel key is not a WireGuard public key (32 bytes, base64)');
  for (const m of members) {
    if (m.id !== self && m.tunnelKey === tunnelKey) throw new MeshpError('MESHP_KEY_IN_USE', `node ${m.id} holds this tunnel key already: one key per node`);
  }
}

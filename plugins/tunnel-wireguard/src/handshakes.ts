/**
 * Each configured peer's latest handshake, as the device answered (`wg show dump`, UAPI `get=1`):
 * what the agent reports so the controller can say a node whose tunnel carries nothing is not ok.
 * A peer configured but not on the device (a change not applied yet) has never handshaked: 0.
 */
import type { PeerHandshake } from '@meshp/core';
import type { PeerConfig } from './peer-config.js';
import type { DeviceState } from './uapi.js';

export function peerHandshakes(configured: ReadonlyMap<string, PeerConfig>, state: DeviceState): PeerHandshake[] {
  const onDevice = new Map(state.peers.map((p) => [p.publicKey, p.lastHandshake]));
  return [...configured]
    .map(([peer, c]) => ({ peer, publicKey: c.publicKey, latestHandshake: onDevice.get(c.publicKey) ?? 0 }))
    .sort((a, b) => a.peer.localeCompare(b.peer));
}

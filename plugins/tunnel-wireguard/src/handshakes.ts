/**
 * Each configured peer's latest handshake, as the device answered (`wg show dump`, UAPI `get=1`):
 * what the agent reports so the controller can say a node whose tunnel carries nothing is not ok.
 * A peer configured but not on the device (a change not applied yet) has never handshaked: 0.
 *
 * With it, the path (issue 27): the endpoint the device sends to now (the one it learned from the
 * peer's last authenticated packet, or the one configured), and whether that endpoint is the peer
 * (direct) or this node's local relay proxy (relayed); no endpoint, no path. Read, never assumed.
 * A relayed peer whose direct candidate is on trial (direct-trials.ts: set by this node, not learned
 * from a packet) is `trying` until the trial is judged: its handshake came on the relay, not there.
 */
import type { PeerHandshake } from '@meshp/core';
import type { PeerConfig } from './peer-config.js';
import type { DeviceState } from './uapi.js';

/**
 * `relayed(endpoint)`: whether an endpoint is one of this node's relay proxies (none: every path is
 * direct); `trying(peer)`: whether the peer's direct candidate is on trial now.
 */
export function peerHandshakes(
  configured: ReadonlyMap<string, PeerConfig>,
  state: DeviceState,
  relayed: (endpoint: string) => boolean = () => false,
  trying: (peer: string) => boolean = () => false,
): PeerHandshake[] {
  const onDevice = new Map(state.peers.map((p) => [p.publicKey, p]));
  return [...configured]
    .map(([peer, c]): PeerHandshake => {
      const d = onDevice.get(c.publicKey);
      const endpoint = d?.endpoint && d.endpoint !== '(none)' ? d.endpoint : '';
      return {
        peer,
        publicKey: c.publicKey,
        latestHandshake: d?.lastHandshake ?? 0,
        ...(endpoint ? { endpoint, path: relayed(endpoint) ? 'relayed' : trying(peer) ? 'trying' : 'direct' } : {}),
      };
    })
    .sort((a, b) => a.peer.localeCompare(b.peer));
}

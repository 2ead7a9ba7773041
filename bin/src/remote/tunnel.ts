/** `meshp agent --tunnel wireguard`: the tunnel plugin, and its public key sent at enrolment. */
import { join } from 'node:path';
import { MeshpError, type AgentMessage, type ControlLink } from '@meshp/core';
import { TunnelWireguardPlugin, type TunnelLog } from '@meshp/tunnel-wireguard';
import { DEFAULT_TUNNEL_INTERFACE, savedTunnel } from '../genesis/private-network.js';

export const TUNNEL_KINDS = ['none', 'wireguard'] as const;
export { DEFAULT_TUNNEL_INTERFACE };

/** `--tunnel` when given; else the tunnel genesis chose for this state folder (the control-node's agent); else none. */
export function tunnelOf(a: { state: string; tunnel?: string; tunnelInterface?: string; tunnelGraceMs?: number }, log: TunnelLog): TunnelWireguardPlugin | null {
  const saved = a.tunnel === undefined ? savedTunnel(a.state) : null;
  const kind = a.tunnel ?? saved?.tunnel ?? 'none';
  if (kind === 'none') return null;
  if (kind !== 'wireguard') throw new MeshpError('MESHP_USAGE', `--tunnel ${kind}: one of ${TUNNEL_KINDS.join(', ')}`);
  return new TunnelWireguardPlugin({
    interface: a.tunnelInterface ?? saved?.interface ?? DEFAULT_TUNNEL_INTERFACE,
    stateDir: join(a.state, 'wireguard'),
    ...(a.tunnelGraceMs !== undefined ? { graceMs: a.tunnelGraceMs } : {}),
    log,
  });
}

/**
 * The link, with the tunnel's public key added to the enrolment request and to every report: a key
 * made anew (its file removed, the agent restarted) reaches the controller as a key change.
 */
export function withTunnelKey(link: ControlLink, tunnelKey: string): ControlLink {
  return {
    enrol: (input) => link.enrol({ ...input, tunnelKey }),
    sync: () => {
      const ch = link.sync();
      return {
        send: (m: AgentMessage) => ch.send('report' in m ? { report: { ...m.report, tunnelKey } } : m),
        onMessage: (l) => ch.onMessage(l),
        onClose: (l) => ch.onClose(l),
        close: (e) => ch.close(e),
      };
    },
    close: () => link.close(),
  };
}

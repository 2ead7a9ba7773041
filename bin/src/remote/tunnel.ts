/** `meshp agent`'s tunnel: the plugin for the tunnel this node runs (tunnel-record.ts), and its key and state in every report. */
import { join } from 'node:path';
import { type AgentMessage, type ControlLink, type ResolverReport } from '@meshp/core';
import { decodeToken } from '@meshp/core/agent';
import { TunnelWireguardPlugin, moveTunnel, type TunnelLog } from '@meshp/tunnel-wireguard';
import {
  DEFAULT_TUNNEL_INTERFACE,
  TUNNEL_KINDS,
  decideTunnel,
  knownTunnel,
  readTunnelRecord,
  writeTunnelRecord,
  type TunnelDecision,
} from './tunnel-record.js';

export { DEFAULT_TUNNEL_INTERFACE, TUNNEL_KINDS };

export interface TunnelArgs {
  state: string;
  tunnel?: string;
  tunnelInterface?: string;
  tunnelMove?: boolean;
  tunnelGraceMs?: number;
  /** The enrolment token: a tunnel network's says so. */
  token?: string;
}

/** What this start runs: refused here (MESHP_TUNNEL_MISMATCH, MESHP_USAGE) before anything changes. */
export function tunnelDecision(a: TunnelArgs): TunnelDecision {
  const networkTunnel = a.token ? decodeToken(a.token).claims.tunnel === 'wireguard' : false;
  return decideTunnel({ tunnel: a.tunnel, interface: a.tunnelInterface, move: a.tunnelMove, networkTunnel }, knownTunnel(a.state, a.tunnelInterface));
}

/**
 * The tunnel plugin for this start, or null; a move asked with `--tunnel-move` done first (the old
 * interface down, the key renamed). `--tunnel none` is recorded, so a restart without flags keeps it.
 */
export async function tunnelOf(a: TunnelArgs, log: TunnelLog, exitBypass: readonly string[] = []): Promise<TunnelWireguardPlugin | null> {
  const d = tunnelDecision(a);
  if (d.tunnel === 'none') {
    if (d.explicit && readTunnelRecord(a.state)?.tunnel !== 'none') writeTunnelRecord(a.state, { tunnel: 'none' });
    return null;
  }
  const plugin = new TunnelWireguardPlugin({
    interface: d.interface,
    stateDir: join(a.state, 'wireguard'),
    ...(a.tunnelGraceMs !== undefined ? { graceMs: a.tunnelGraceMs } : {}),
    exitBypass: [...exitBypass],
    log,
  });
  if (d.moveFrom) {
    log.info({ from: d.moveFrom, to: d.interface }, 'tunnel moving: the old interface goes down, the key goes with it');
    const moved = await moveTunnel({ stateDir: join(a.state, 'wireguard'), from: d.moveFrom, to: d.interface });
    log.info({ ...moved }, 'tunnel moved');
  }
  log.info({ interface: d.interface, why: d.why }, 'tunnel chosen');
  return plugin;
}

/** Once the plugin has its key (after the host is assembled): the tunnel as it runs now, recorded. */
export function recordTunnel(state: string, plugin: TunnelWireguardPlugin, log: TunnelLog): void {
  const before = readTunnelRecord(state);
  const now = { tunnel: 'wireguard' as const, interface: plugin.status().interface, publicKey: plugin.publicKey() };
  if (before?.tunnel === 'wireguard' && before.interface === now.interface && before.publicKey && before.publicKey !== now.publicKey) {
    // Its key file removed on purpose (a rotation): the new key reaches the peers as a key change.
    log.warn({ interface: now.interface, was: before.publicKey, now: now.publicKey }, 'tunnel key made anew: not the recorded one');
  }
  if (JSON.stringify(before) !== JSON.stringify(now)) writeTunnelRecord(state, now);
}

/**
 * The link, with the tunnel's public key added to the enrolment request and to every report, with
 * its interface and why it is not up: a key made anew reaches the controller as a key change, a
 * tunnel that failed is flagged on the node's status. With the mesh's resolver (issue 25), its
 * status too: `meshp node show` says where the node answers names, from the controller.
 */
/** The resolver's status as a report carries it (its counters by outcome stay on the node's /metrics). */
function resolverReport(s: ResolverReport): ResolverReport {
  const { address, port, domain, names, upstreams, upstreamsFrom, lastError, lastAnswerError, queries, manager, integrated, integration } = s;
  return { address, port, domain, names, upstreams, upstreamsFrom, lastError, lastAnswerError, queries, manager, integrated, integration };
}

export function withTunnel(link: ControlLink, tunnel: TunnelWireguardPlugin, resolver?: { status(): ResolverReport } | null): ControlLink {
  return {
    enrol: (input) => link.enrol({ ...input, tunnelKey: tunnel.publicKey() }),
    sync: () => {
      const ch = link.sync();
      const report = (r: Extract<AgentMessage, { report: unknown }>['report']) => {
        const s = tunnel.status();
        const dns = resolver ? resolverReport(resolver.status()) : null;
        // The key as it is now: one made anew (meshp node rekey) reaches the controller as a key change.
        return {
          ...r,
          tunnelKey: tunnel.publicKey(),
          tunnelInterface: s.interface,
          ...(s.lastError ? { tunnelError: s.lastError } : {}),
          ...(dns ? { dns } : {}),
        };
      };
      return {
        send: (m: AgentMessage) => ch.send('report' in m ? { report: report(m.report) } : m),
        onMessage: (l) => ch.onMessage(l),
        onClose: (l) => ch.onClose(l),
        close: (e) => ch.close(e),
      };
    },
    close: () => link.close(),
  };
}

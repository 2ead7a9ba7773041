/**
 * How genesis makes the mesh's private network (issue 16).
 *
 * - `--private-interface IF`: the machines already share a private network; the mesh uses it as it is.
 * - otherwise the **tunnel**: the control-node gets a WireGuard key in its agent's state folder, is
 *   enrolled with it (and with `--endpoint`s), and its agent raises the interface (`tunnel.json`
 *   tells `meshp agent` to, without flags). Every other node enrols over the underlay and is then
 *   reached over the tunnel at its mesh address.
 *
 * Bootstrap over the underlay: a node not yet in the mesh has no tunnel, so the **control port** is
 * the mesh's one door on the underlay — opened from anywhere, gated by what it already checks: a
 * one-use enrolment token (and the pinned controller certificate) to enrol, the node key's signed
 * challenge on every Sync stream. The store, registry, bus and broker stay private: opened from the
 * private range only (the tunnel's addresses), with refusals from anywhere else on the forwarded path.
 */
import { join } from 'node:path';
import { usage } from '@meshp/core/util';
import type { CatalogueModule } from '@meshp/core/catalogue';
import { ensureTunnelKey } from '@meshp/tunnel-wireguard';
import { DEFAULT_TUNNEL_INTERFACE, TUNNEL_FILE, readTunnelRecord, writeTunnelRecord, type TunnelRecord } from '../remote/tunnel-record.js';

/** In the agent's state folder: the tunnel its agent raises when no `--tunnel` flag is given (remote/tunnel-record.ts). */
export { TUNNEL_FILE, DEFAULT_TUNNEL_INTERFACE };

export type PrivateNetwork = { kind: 'interface'; interface: string } | { kind: 'tunnel'; interface: string };

export function privateNetworkOf(o: { privateInterface?: string; tunnelInterface?: string }): PrivateNetwork {
  if (o.privateInterface) return { kind: 'interface', interface: o.privateInterface };
  const ifname = o.tunnelInterface ?? DEFAULT_TUNNEL_INTERFACE;
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(ifname)) throw usage(`tunnel interface name ${JSON.stringify(ifname)}: 1 to 15 letters, digits, _ . -`);
  return { kind: 'tunnel', interface: ifname };
}

/**
 * The catalogue as the network's modules: with the tunnel, the control module's openings from the
 * private range are opened from anywhere (the bootstrap door); nothing else changes.
 */
export function bootstrapCatalogue(catalogue: CatalogueModule[], net: PrivateNetwork): CatalogueModule[] {
  if (net.kind !== 'tunnel') return catalogue;
  return catalogue.map((m) =>
    m.name !== 'control' ? m : { ...m, openings: (m.openings ?? []).map((o) => ({ ...(o as Record<string, unknown>), from: [] })) },
  );
}

/** The control-node's tunnel key (made now, kept in its agent's state folder) and its agent's tunnel record. */
export function prepareTunnel(agentDir: string, net: PrivateNetwork): string | undefined {
  if (net.kind !== 'tunnel') return undefined;
  const key = ensureTunnelKey(join(agentDir, 'wireguard'), net.interface);
  writeTunnelRecord(agentDir, { tunnel: 'wireguard', interface: net.interface, publicKey: key.publicKey });
  return key.publicKey;
}

/** What genesis left for this agent: its tunnel when it raised one; null otherwise. */
export function savedTunnel(state: string): (TunnelRecord & { interface: string }) | null {
  const r = readTunnelRecord(state);
  return r?.tunnel === 'wireguard' && r.interface ? { ...r, interface: r.interface } : null;
}

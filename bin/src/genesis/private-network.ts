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
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import type { CatalogueModule } from '@meshp/core/catalogue';
import { ensureTunnelKey } from '@meshp/tunnel-wireguard';

/** In the agent's state folder: the tunnel its agent raises when no `--tunnel` flag is given. */
export const TUNNEL_FILE = 'tunnel.json';
export const DEFAULT_TUNNEL_INTERFACE = 'meshp0';

export type PrivateNetwork = { kind: 'interface'; interface: string } | { kind: 'tunnel'; interface: string };

export interface TunnelChoice {
  tunnel: 'wireguard';
  interface: string;
}

export function privateNetworkOf(o: { privateInterface?: string; tunnelInterface?: string }): PrivateNetwork {
  if (o.privateInterface) return { kind: 'interface', interface: o.privateInterface };
  const ifname = o.tunnelInterface ?? DEFAULT_TUNNEL_INTERFACE;
  if (!/^[A-Za-z0-9_.-]{1,15}$/.test(ifname)) throw new MeshpError('MESHP_USAGE', `tunnel interface name ${JSON.stringify(ifname)}: 1 to 15 letters, digits, _ . -`);
  return { kind: 'tunnel', interface: ifname };
}

/**
 * The catalogue as the network's modules: with the tunnel, the control module's openings from the
 * private range are opened from anywhere (the bootstrap door); nothing else changes.
 */
export function bootstrapCatalogue(catalogue: CatalogueModule[], net: PrivateNetwork): CatalogueModule[] {
  if (net.kind !== 'tunnel') return catalogue;
  return catalogue.map((m) => (m.name !== 'control' ? m : { ...m, openings: (m.openings ?? []).map((o) => ({ ...(o as Record<string, unknown>), from: [] })) }));
}

/** The control-node's tunnel key (made now, kept in its agent's state folder) and the agent's choice file. */
export function prepareTunnel(agentDir: string, net: PrivateNetwork): string | undefined {
  if (net.kind !== 'tunnel') return undefined;
  const key = ensureTunnelKey(join(agentDir, 'wireguard'), net.interface);
  const choice: TunnelChoice = { tunnel: 'wireguard', interface: net.interface };
  writeFileSync(join(agentDir, TUNNEL_FILE), `${JSON.stringify(choice)}\n`, { mode: 0o600 });
  return key.publicKey;
}

/** What genesis left for this agent: its tunnel when it raised one; null otherwise. */
export function savedTunnel(state: string): TunnelChoice | null {
  const file = join(state, TUNNEL_FILE);
  if (!existsSync(file)) return null;
  const c = JSON.parse(readFileSync(file, 'utf8')) as Partial<TunnelChoice>;
  return c.tunnel === 'wireguard' && typeof c.interface === 'string' ? { tunnel: 'wireguard', interface: c.interface } : null;
}

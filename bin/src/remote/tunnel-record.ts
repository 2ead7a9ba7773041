/**
 * The tunnel a node runs, remembered in its agent's state folder (`tunnel.json`): the choice
 * (`wireguard` or `none`), the interface and its public key. Genesis writes it for the control-node;
 * every other agent at its first start. Read at every start after, so a restart with no tunnel
 * flags, or with `--tunnel wireguard` alone, raises the same interface with the same key; a start
 * that names another interface, or `--tunnel none` over a running tunnel, is refused
 * (MESHP_TUNNEL_MISMATCH) before anything changes, unless `--tunnel-move` says to move it.
 *
 * With no record, what the network says decides: a tunnel network's enrolment token says so
 * (`TokenClaims.tunnel`), and the agent raises the tunnel without being told.
 */
import { existsSync, readFileSync, readdirSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { usage } from '@meshp/core/util';

export const TUNNEL_FILE = 'tunnel.json';
export const DEFAULT_TUNNEL_INTERFACE = 'meshp0';
export const TUNNEL_KINDS = ['none', 'wireguard'] as const;

export interface TunnelRecord {
  tunnel: 'wireguard' | 'none';
  /** The interface, when the node runs (or ran) a tunnel. */
  interface?: string;
  /** Its public key (base64), as it was when recorded: for the operator to read back. */
  publicKey?: string;
}

/** What is known of the node's tunnel: the record, or for a state folder from before it a single key found. */
export interface KnownTunnel {
  record: TunnelRecord;
  /** How it is known, for the refusals: `recorded in FILE` or `found KEYFILE`. */
  from: string;
  /** Found from a key file, not recorded: it may not have run since. */
  inferred: boolean;
}

export function readTunnelRecord(state: string): TunnelRecord | null {
  const file = join(state, TUNNEL_FILE);
  if (!existsSync(file)) return null;
  const c = JSON.parse(readFileSync(file, 'utf8')) as Partial<TunnelRecord>;
  if (c.tunnel !== 'wireguard' && c.tunnel !== 'none') return null;
  return {
    tunnel: c.tunnel,
    ...(typeof c.interface === 'string' ? { interface: c.interface } : {}),
    ...(typeof c.publicKey === 'string' ? { publicKey: c.publicKey } : {}),
  };
}

/** Written whole and renamed over the old one: a crash leaves one record or the other. */
export function writeTunnelRecord(state: string, r: TunnelRecord): void {
  const file = join(state, TUNNEL_FILE);
  writeFileSync(`${file}.tmp`, `${JSON.stringify(r)}\n`, { mode: 0o600 });
  renameSync(`${file}.tmp`, file);
}

/**
 * The record, else (a state folder an older meshp ran a tunnel in, without a record) the one key
 * its tunnel left; several keys and no record: the interface is not guessed.
 */
export function knownTunnel(state: string, named?: string): KnownTunnel | null {
  const record = readTunnelRecord(state);
  if (record) return { record, from: `recorded in ${join(state, TUNNEL_FILE)}`, inferred: false };
  const dir = join(state, 'wireguard');
  const keys = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.key'))
        .map((f) => f.slice(0, -4))
        .sort()
    : [];
  if (keys.length === 1) return { record: { tunnel: 'wireguard', interface: keys[0]! }, from: `found ${join(dir, `${keys[0]}.key`)}`, inferred: true };
  if (keys.length > 1 && !(named && keys.includes(named))) {
    throw new MeshpError(
      'MESHP_TUNNEL_MISMATCH',
      `${dir} holds keys for ${keys.join(', ')} and no ${TUNNEL_FILE} says which tunnel this node runs: name it with --tunnel-interface`,
    );
  }
  return keys.length > 1 ? { record: { tunnel: 'wireguard', interface: named! }, from: `found ${join(dir, `${named}.key`)}`, inferred: true } : null;
}

export interface TunnelAsked {
  /** `--tunnel`. */
  tunnel?: string;
  /** `--tunnel-interface`. */
  interface?: string;
  /** `--tunnel-move`: a recorded tunnel on another interface is moved to the one named. */
  move?: boolean;
  /** The network's word: its token says its private network is the tunnel. */
  networkTunnel?: boolean;
}

export type TunnelDecision = { tunnel: 'none'; explicit: boolean } | { tunnel: 'wireguard'; interface: string; moveFrom?: string; why: string };

const keySaid = (r: TunnelRecord) => (r.publicKey ? `, key ${r.publicKey}` : '');

/** What the agent runs, from its flags, its record and the network's word; refused before anything changes. */
export function decideTunnel(a: TunnelAsked, known: KnownTunnel | null): TunnelDecision {
  if (a.tunnel !== undefined && !(TUNNEL_KINDS as readonly string[]).includes(a.tunnel)) throw usage(`--tunnel ${a.tunnel}: one of ${TUNNEL_KINDS.join(', ')}`);
  if (a.move && !a.interface) throw usage('--tunnel-move moves the tunnel to the interface --tunnel-interface names: give it');
  const r = known?.record;
  const running = r?.tunnel === 'wireguard' && r.interface ? r.interface : undefined;
  if (a.tunnel === 'none') {
    // A key an older meshp left says a tunnel ran once, not that it runs: opting out of it is allowed.
    if (running && !known!.inferred) {
      throw new MeshpError(
        'MESHP_TUNNEL_MISMATCH',
        `--tunnel none: this node runs the tunnel on ${running}${keySaid(r!)} (${known!.from}); an agent that stopped carrying it would leave it up, unmanaged. Start the agent without --tunnel none; to leave the mesh: meshp node remove NODE`,
      );
    }
    return { tunnel: 'none', explicit: true };
  }
  const kind = a.tunnel ?? r?.tunnel ?? (a.networkTunnel ? 'wireguard' : 'none');
  if (kind === 'none') return { tunnel: 'none', explicit: false };
  const why = a.tunnel ? '--tunnel wireguard' : r ? known!.from : "the network's private network is the tunnel";
  if (a.interface && running && a.interface !== running) {
    if (!a.move) {
      throw new MeshpError(
        'MESHP_TUNNEL_MISMATCH',
        `--tunnel-interface ${a.interface}: this node's tunnel is ${running}${keySaid(r!)} (${known!.from}); raising ${a.interface} would make a second interface with another key. Give --tunnel-interface ${running} (or leave it out), or add --tunnel-move to move the tunnel to ${a.interface} with its key`,
      );
    }
    return { tunnel: 'wireguard', interface: a.interface, moveFrom: running, why: `--tunnel-move from ${running}` };
  }
  return { tunnel: 'wireguard', interface: a.interface ?? running ?? r?.interface ?? DEFAULT_TUNNEL_INTERFACE, why };
}

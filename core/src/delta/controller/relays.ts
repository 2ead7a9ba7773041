/**
 * The network's relays (issue 27, ADR 0040): TURN servers the operator names (`meshp relay set`),
 * each with the name of a shared secret (coturn `use-auth-secret` / `static-auth-secret`) that only
 * the controller holds. Each tunnel member is sent its own short-lived TURN REST API credential per
 * relay: the username `EXPIRY:NODE` and base64(HMAC-SHA1(secret, username)); never the secret.
 *
 * The credentials are a function of the stored record (the secret, `mintedAt`) and the node, so a
 * snapshot and a delta compute the same component: the controller renews them by moving `mintedAt`
 * (one version) once half of RELAY_CREDENTIAL_S has passed, so a node always holds one with at
 * least half its lifetime left while it is connected.
 */
import { createHmac } from 'node:crypto';
import type { Relay, Relays } from '../../contract/wire.js';

/** How long a credential sent to a node is valid (seconds). */
export const RELAY_CREDENTIAL_S = 3600;

/** A relay as the operator declares it: no credential, the name of its secret. */
export interface RelayRecord {
  id: string;
  address: string;
  port: number;
  /** udp | tcp */
  transport: string;
  region: string;
  secretName: string;
}

/** The relays component as the controller stores it (in the network's document). */
export interface StoredRelays {
  relays: RelayRecord[];
  /** The secrets by name (never sent to a node, never listed). */
  secrets?: Record<string, string>;
  /** Unix seconds: when the credentials in force were minted (their expiry is this plus RELAY_CREDENTIAL_S). */
  mintedAt?: number;
}

export interface TurnCredential {
  username: string;
  password: string;
  /** Unix seconds. */
  expires: number;
}

/** A TURN REST API credential for `name`, valid `ttlSeconds` from `nowS` (coturn `use-auth-secret`, `static-auth-secret`). */
export function turnCredential(secret: string, name: string, ttlSeconds: number, nowS = Math.floor(Date.now() / 1000)): TurnCredential {
  const expires = nowS + ttlSeconds;
  const username = `${expires}:${name}`;
  return { username, password: createHmac('sha1', secret).update(username).digest('base64'), expires };
}

/**
 * The relays `node` is sent: every relay whose secret is held, each with the node's own credential
 * (valid `ttlSeconds` from `mintedAt`: RELAY_CREDENTIAL_S; a lab gives a short one); none for a
 * member without a tunnel.
 */
export function relaysFor(
  node: { readonly id: string; readonly tunnelKey?: string | undefined },
  stored: StoredRelays | undefined,
  ttlSeconds = RELAY_CREDENTIAL_S,
): Relays {
  if (!node.tunnelKey || !stored?.relays.length) return { relays: [] };
  const minted = stored.mintedAt ?? 0;
  const relays: Relay[] = [];
  for (const r of stored.relays) {
    const secret = stored.secrets?.[r.secretName];
    if (!secret) continue;
    const c = turnCredential(secret, node.id, ttlSeconds, minted);
    relays.push({
      id: r.id,
      address: r.address,
      port: r.port,
      region: r.region,
      transport: r.transport,
      username: c.username,
      password: c.password,
      expires: c.expires,
    });
  }
  return { relays };
}

/** Whether the credentials minted at `mintedAt` are to be renewed at `nowS`: half their lifetime gone. */
export function relayCredentialsDue(stored: StoredRelays | undefined, nowS: number): boolean {
  if (!stored?.relays.length) return false;
  return nowS - (stored.mintedAt ?? 0) >= RELAY_CREDENTIAL_S / 2;
}

/** A peer's relayed candidate as it is carried in Peer.endpoints: an older agent reads no endpoint in it and skips it. */
export const RELAY_CANDIDATE_PREFIX = 'relay:';

/**
 * A network's relays (issue 27, ADR 0040): TURN servers declared by the operator (`relay set`), each
 * naming the shared secret the controller holds for it (coturn `static-auth-secret`), read back with
 * the nodes that report an allocation on it, and removed. Stored in the network's document (the
 * `relays` component: no migration). Every tunnel member is sent its own short-lived credentials
 * (core delta/controller/relays.ts); `renewRelayCredentials` mints new ones once half their lifetime
 * is gone, as one version.
 */
import { MeshpError } from '@meshp/core';
import { relayCredentialsDue, relaysFor, type RelayRecord, type StoredRelays } from '@meshp/core/delta';
import { canonicalJson } from '@meshp/core/reconcile';
import { notFound } from '@meshp/core/util';
import { setComponent } from './networks.js';
import type { ControllerState } from './state.js';

export interface RelayChange {
  stateVersion: number;
  /** The members whose relays component changes (or would, with preview). */
  changedNodes: string[];
}

/** At most this many relays in a network, and a secret at most this long. */
export const RELAY_LIMITS = { relays: 16, secretBytes: 1024 } as const;

const invalid = (message: string, details?: Record<string, unknown>) => new MeshpError('MESHP_RELAY_INVALID', message, details ? { details } : undefined);
const NAME = /^[a-z0-9][a-z0-9-]{0,62}$/;
const HOST = /^(?:\d{1,3}(?:\.\d{1,3}){3}|\[?[0-9a-fA-F:]+\]?|[a-zA-Z0-9](?:[a-zA-Z0-9.-]{0,251}[a-zA-Z0-9])?)$/;

/** The relay as it is stored, checked: a clear coded error names what is wrong, nothing stored. */
export function checkRelay(r: Partial<RelayRecord>): RelayRecord {
  const id = r.id ?? '';
  if (!NAME.test(id)) throw invalid(`a relay's id is lower-case letters, digits and '-', not ${JSON.stringify(id)}`, { id });
  const address = (r.address ?? '').trim();
  if (!HOST.test(address)) throw invalid(`relay ${id}: ${JSON.stringify(address)} is not an IP address or host name`, { address });
  const port = Number(r.port ?? 0);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw invalid(`relay ${id}: port ${String(r.port)} is not 1-65535`, { port: r.port });
  const transport = r.transport || 'udp';
  if (transport !== 'udp' && transport !== 'tcp') throw invalid(`relay ${id}: transport ${JSON.stringify(transport)} is udp or tcp`, { transport });
  const secretName = r.secretName ?? '';
  if (!NAME.test(secretName))
    throw invalid(`relay ${id}: the secret's name is lower-case letters, digits and '-', not ${JSON.stringify(secretName)}`, { secretName });
  return { id, address: address.replace(/^\[|\]$/g, ''), port, transport, region: r.region ?? '', secretName };
}

const storedOf = (s: ControllerState, network: string): StoredRelays => s.net(network).record.components.relays ?? { relays: [] };

export interface RelayState {
  relay: RelayRecord;
  secretHeld: boolean;
}

export function listRelays(s: ControllerState, network: string): RelayState[] {
  const st = storedOf(s, network);
  return st.relays.map((r) => ({ relay: { ...r }, secretHeld: !!st.secrets?.[r.secretName] }));
}

/** Adds or replaces the relay of that id; `secret`: the value of its secret ('' keeps the one held). */
export function setRelay(s: ControllerState, network: string, wanted: Partial<RelayRecord>, secret: string, preview: boolean, nowS: number): RelayChange {
  const r = checkRelay(wanted);
  const st = storedOf(s, network);
  if (secret.length > RELAY_LIMITS.secretBytes)
    throw new MeshpError('MESHP_INPUT_TOO_LARGE', `relay ${r.id}: the secret is over ${RELAY_LIMITS.secretBytes} bytes`);
  if (/[\r\n]/.test(secret.trim())) throw invalid(`relay ${r.id}: the secret is one line`);
  const secrets = { ...(st.secrets ?? {}) };
  if (secret.trim()) secrets[r.secretName] = secret.trim();
  if (!secrets[r.secretName])
    throw invalid(`relay ${r.id}: the controller holds no secret named ${r.secretName}: give it (meshp relay set --secret-file PATH)`, {
      secretName: r.secretName,
    });
  const others = st.relays.filter((x) => x.id !== r.id);
  if (others.length >= RELAY_LIMITS.relays)
    throw new MeshpError('MESHP_INPUT_TOO_LARGE', `${network} has ${others.length} relays: at most ${RELAY_LIMITS.relays}`);
  const relays = [...others, r].sort((a, b) => (a.id < b.id ? -1 : 1));
  return change(s, network, { relays, secrets: pruned(relays, secrets), mintedAt: st.mintedAt ?? nowS }, preview);
}

export function removeRelay(s: ControllerState, network: string, id: string, preview: boolean): RelayChange {
  const st = storedOf(s, network);
  if (!st.relays.some((r) => r.id === id)) throw notFound('relay', id, network);
  const relays = st.relays.filter((r) => r.id !== id);
  return change(s, network, { relays, secrets: pruned(relays, st.secrets ?? {}), ...(st.mintedAt ? { mintedAt: st.mintedAt } : {}) }, preview);
}

/** A secret no relay names any more is not kept. */
const pruned = (relays: readonly RelayRecord[], secrets: Record<string, string>): Record<string, string> =>
  Object.fromEntries(Object.entries(secrets).filter(([n]) => relays.some((r) => r.secretName === n)));

/**
 * New credentials for every member once half the lifetime of those in force is gone (one version;
 * each connected member gets its new relays component in a delta). Null: none due.
 */
export function renewRelayCredentials(s: ControllerState, network: string, nowS: number): number | null {
  const st = storedOf(s, network);
  if (!relayCredentialsDue(st, nowS)) return null;
  return setComponent(s, network, 'relays', { ...st, mintedAt: nowS });
}

function change(s: ControllerState, network: string, after: StoredRelays, preview: boolean): RelayChange {
  const net = s.net(network);
  const before = storedOf(s, network);
  const changedNodes = [...net.members.values()]
    .filter((m) => canonicalJson(relaysFor(m, before)) !== canonicalJson(relaysFor(m, after)))
    .map((m) => m.id)
    .sort();
  if (preview) return { stateVersion: net.version, changedNodes };
  return { stateVersion: setComponent(s, network, 'relays', after), changedNodes };
}

/**
 * `meshp relay list | set ID | remove ID` (issue 27, ADR 0040): one Admin call each, a table or one
 * JSON document. A relay is a TURN server and the name of the shared secret the controller holds for
 * it; `--secret-file` gives the controller that secret's value (read here, sent to the controller
 * only, never to a node, never printed).
 */
import { readFileSync } from 'node:fs';
import { MeshpError } from '@meshp/core';
import { confirmChange, say, table, type Change, type Out } from '../output.js';
import { withAdmin, type RemoteArgs } from './admin.js';

export async function relayList(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('listRelays', { network }));
  const relays = r.relays.map((x) => ({
    id: x.relay?.id ?? '',
    address: x.relay?.address ?? '',
    port: x.relay?.port ?? 0,
    transport: x.relay?.transport || 'udp',
    region: x.relay?.region ?? '',
    secretName: x.relay?.secretName ?? '',
    secretHeld: x.secretHeld,
    allocations: x.allocations.map((y) => ({ node: y.node, relayedAddress: y.relayedAddress })),
  }));
  const rows = relays.map((x) => [
    x.id,
    `${x.address}:${x.port}/${x.transport}`,
    x.secretHeld ? x.secretName : `${x.secretName} (not held: no credential sent)`,
    x.allocations.map((y) => `${y.node}=${y.relayedAddress}`).join(',') || '-',
  ]);
  say(
    a,
    { relays, credentialSeconds: r.credentialSeconds },
    rows.length ? `${table(['RELAY', 'SERVER', 'SECRET', 'ALLOCATIONS'], rows)}\ncredentials: ${r.credentialSeconds} s, renewed at half` : 'no relays',
  );
}

const whoChanges = (nodes: readonly string[]): string => (nodes.length ? `changes ${nodes.length} node(s): ${nodes.join(', ')}` : 'changes no node');

/** `host:port` (`[v6]:port`) of the server. */
function serverOf(text: string): { address: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(text.trim());
  if (!m) throw new MeshpError('MESHP_RELAY_INVALID', `a relay's server is HOST:PORT (e.g. 203.0.113.5:3478), not ${JSON.stringify(text)}`);
  return { address: m[1] ?? m[2]!, port: Number(m[3]) };
}

function secretOf(path: string | undefined): string {
  if (!path) return '';
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (e) {
    throw new MeshpError('MESHP_RELAY_INVALID', `the secret file ${path} cannot be read: ${(e as Error).message}`);
  }
}

export async function relaySet(
  a: RemoteArgs & Out & Change & { id: string; server: string; transport: string; region: string; secret: string; secretFile?: string },
): Promise<void> {
  const relay = { id: a.id, ...serverOf(a.server), transport: a.transport, region: a.region, secretName: a.secret };
  const secret = secretOf(a.secretFile);
  if (a.secretFile && !secret) throw new MeshpError('MESHP_RELAY_INVALID', `the secret file ${a.secretFile} is empty`);
  const what = `relay ${relay.id}: ${relay.address}:${relay.port}/${relay.transport}, secret ${relay.secretName}${secret ? ' (from ' + a.secretFile + ')' : ''}`;
  const ask = (preview: boolean) => withAdmin(a, (c, network) => c.call('setRelay', { network, relay, secret, preview }));
  const preview = await ask(true);
  if (a.preview)
    return say(
      a,
      { preview: true, changedNodes: preview.changedNodes, relay },
      `would set ${what}: ${whoChanges(preview.changedNodes)}\n(preview: nothing changed)`,
    );
  await confirmChange(a.yes, `Set ${what}? ${whoChanges(preview.changedNodes)}`, 'pass --yes to set it (or --preview to see what it does)');
  const r = await ask(false);
  say(a, { stateVersion: r.stateVersion, changedNodes: r.changedNodes, relay }, `${what} set (state version ${r.stateVersion}): ${whoChanges(r.changedNodes)}`);
}

export async function relayRemove(a: RemoteArgs & Out & Change & { id: string }): Promise<void> {
  const ask = (preview: boolean) => withAdmin(a, (c, network) => c.call('removeRelay', { network, id: a.id, preview }));
  const preview = await ask(true);
  if (a.preview)
    return say(
      a,
      { preview: true, changedNodes: preview.changedNodes },
      `would remove relay ${a.id}: ${whoChanges(preview.changedNodes)}\n(preview: nothing changed)`,
    );
  await confirmChange(
    a.yes,
    `Remove relay ${a.id}? ${whoChanges(preview.changedNodes)}: their relayed paths through it close`,
    'pass --yes to remove it (or --preview to see what it does)',
  );
  const r = await ask(false);
  say(
    a,
    { stateVersion: r.stateVersion, changedNodes: r.changedNodes },
    `relay ${a.id} removed (state version ${r.stateVersion}): ${whoChanges(r.changedNodes)}`,
  );
}

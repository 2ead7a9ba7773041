/** `meshp node remove|rename` and `meshp network create|list|remove`: one Admin call each. */
import { confirmChange, say, table, type Out } from '../output.js';
import { present, withAdmin, type RemoteArgs } from './admin.js';
import { nodeJson, type WireNodeStatus } from './render.js';

/** What a removal does, said before it is asked for or previewed: the node as the controller holds it now. */
export function removalOf(n: WireNodeStatus): string {
  return (
    `remove node ${n.name} from ${n.network} (addresses ${n.addresses.join(', ') || '-'}; tags ${n.tags.join(', ') || '-'}; assigned ${n.assignedModules.join(', ') || '-'}; ${n.connected ? 'connected' : 'not connected'}): ` +
    'its credential and node key are revoked for good (the key is refused from then on), its stream is ended, its peers are told REMOVED and drop it; ' +
    'its agent, told so, takes away what the mesh added to the machine (its tunnel, its marked firewall rules; a found firewall it retired is re-enabled) and exits, keeping what it found there'
  );
}

/** Revocation cannot be undone (the key stays refused): previewed with --preview, asked unless --yes. */
export async function nodeRemove(a: RemoteArgs & Out & { node: string; yes: boolean; preview: boolean }): Promise<void> {
  const r = await withAdmin(a, async (c, network) => {
    if (a.preview || !a.yes) {
      const what = removalOf(present((await c.call('showNode', { network, node: a.node })).node, 'node'));
      if (a.preview) return { preview: what };
      await confirmChange(false, `${what}?`, 'pass --yes to remove (or --preview to see what it does)');
    }
    return c.call('removeNode', { network, node: a.node });
  });
  if ('preview' in r) return say(a, { preview: true, would: r.preview }, `would ${r.preview}\n(preview: nothing changed)`);
  say(a, { removed: a.node, stateVersion: r.stateVersion }, `removed ${a.node}: credential and key revoked, peers told (state version ${r.stateVersion})`);
}

export async function nodeRename(a: RemoteArgs & Out & { node: string; newName: string }): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('renameNode', { network, node: a.node, newName: a.newName }));
  const node = present(r.node, 'node');
  if (a.node === a.newName) return say(a, { node: nodeJson(node) }, `${a.node} has that name already: nothing changed (state version ${node.stateVersion})`);
  say(a, { node: nodeJson(node) }, `renamed ${a.node} to ${node.name} (state version ${node.stateVersion})`);
}

export async function networkCreate(a: RemoteArgs & Out & { name: string; range?: string }): Promise<void> {
  const r = await withAdmin(a, (c) => c.call('createNetwork', { network: a.name, privateRange: a.range ?? '' }));
  const n = present(r.network, 'network');
  say(a, { network: n }, `created network ${n.name} (${n.privateRange})`);
}

export async function networkList(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c) => c.call('listNetworks', {}));
  const nets = r.networks;
  say(
    a,
    { networks: nets },
    table(
      ['NETWORK', 'NODES', 'VERSION', 'RANGE'],
      nets.map((n) => [n.name, String(n.members), String(n.stateVersion), n.privateRange]),
    ),
  );
}

export async function networkRemove(a: RemoteArgs & Out & { name: string; yes: boolean }): Promise<void> {
  await confirmChange(a.yes, `Remove network ${a.name}?`, 'pass --yes to remove');
  await withAdmin(a, (c) => c.call('removeNetwork', { network: a.name }));
  say(a, { removed: a.name }, `removed network ${a.name}`);
}

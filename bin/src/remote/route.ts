/** `meshp route list | set NAME | remove NAME` (issue 26): one Admin call each, a table or one JSON document. */
import { MeshpError } from '@meshp/core';
import { checkRouteGroup, EXIT_PREFIXES } from '@meshp/core/schema';
import { usage } from '@meshp/core/util';
import { confirmChange, say, table, type Change, type Out } from '../output.js';
import { withAdmin, type RemoteArgs } from './admin.js';

export async function routeList(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('listRouteGroups', { network }));
  const groups = r.groups.map((g) => ({
    name: g.group?.name ?? '',
    prefixes: g.group?.prefixes ?? [],
    via: g.group?.viaPeers ?? [],
    masquerade: g.group?.noMasquerade !== true,
    primary: g.primary,
    users: g.users,
    missingVia: g.missingVia,
    exit: g.exit,
  }));
  const rows = groups.map((g) => [
    g.exit ? `${g.name} (exit node)` : g.name,
    g.prefixes.join(','),
    g.via.map((v) => (g.missingVia.includes(v) ? `${v} (not a member)` : v)).join(','),
    g.masquerade ? 'yes' : 'no',
    g.primary || '-',
    g.users.join(',') || '-',
  ]);
  const advertised = r.advertised.map((x) => ({ node: x.node, prefix: x.prefix, group: x.group }));
  const text = rows.length ? table(['GROUP', 'PREFIXES', 'VIA', 'MASQUERADE', 'PRIMARY', 'USERS'], rows) : 'no route groups';
  const offered = advertised.map((x) => [x.node, x.prefix, x.group ? `approved (${x.group})` : 'not approved: serves nothing']);
  say(a, { groups, advertised }, offered.length ? `${text}\n${table(['ADVERTISED BY', 'PREFIX', 'STATE'], offered)}` : text);
}

/** Each via node's forwarding, as the change does it (issue 26): a line per node, indented. */
const forwardingLines = (f: readonly { node: string; change: string }[] | undefined): string =>
  (f ?? []).map((x) => `\n  forwarding on ${x.node}: ${x.change}`).join('');

/** The nodes that change, as one line. */
const whoChanges = (nodes: readonly string[]): string => (nodes.length ? `changes ${nodes.length} node(s): ${nodes.join(', ')}` : 'changes no node');

export async function routeSet(
  a: RemoteArgs & Out & Change & { name: string; prefix: string[]; via: string[]; masquerade?: boolean; exit?: boolean },
): Promise<void> {
  const given = (a.prefix ?? []).map(String);
  if (a.exit && given.some((p) => !EXIT_PREFIXES.includes(p)))
    throw new MeshpError('MESHP_ROUTE_INVALID', `route group ${a.name}: --exit routes 0.0.0.0/0 and ::/0; give no other --prefix`);
  if (!a.exit && !given.length) throw usage('route set: give --prefix P (repeat for more), or --exit for an exit node');
  // Checked here by the one schema before anything is sent: a prefix with host bits set is refused, naming it.
  const group = checkRouteGroup({
    name: a.name,
    prefixes: a.exit ? (given.length ? given : [...EXIT_PREFIXES]) : given,
    viaPeers: a.via.map(String),
    noMasquerade: a.masquerade === false,
  });
  const what = `route group ${group.name}: ${group.prefixes.join(', ')} via ${group.viaPeers.join(', ')}${group.noMasquerade ? ', no masquerade' : ''}`;
  const preview = await withAdmin(a, (c, network) => c.call('setRouteGroup', { network, group, preview: true }));
  if (a.preview)
    return say(
      a,
      { preview: true, changedNodes: preview.changedNodes, group, forwarding: preview.forwarding },
      `would set ${what}: ${whoChanges(preview.changedNodes)}${forwardingLines(preview.forwarding)}\n(preview: nothing changed)`,
    );
  await confirmChange(
    a.yes,
    `Set ${what}? ${whoChanges(preview.changedNodes)}${forwardingLines(preview.forwarding)}`,
    'pass --yes to set it (or --preview to see what it does)',
  );
  const r = await withAdmin(a, (c, network) => c.call('setRouteGroup', { network, group, preview: false }));
  say(
    a,
    { stateVersion: r.stateVersion, changedNodes: r.changedNodes, group, forwarding: r.forwarding },
    `${what} set (state version ${r.stateVersion}): ${whoChanges(r.changedNodes)}${forwardingLines(r.forwarding)}`,
  );
}

export async function routeApprove(a: RemoteArgs & Out & Change & { node: string; group: string; prefix: string[] }): Promise<void> {
  const prefixes = a.prefix.map(String);
  const ask = (preview: boolean) => withAdmin(a, (c, network) => c.call('approveRoute', { network, node: a.node, prefixes, group: a.group, preview }));
  const preview = await ask(true);
  const what = `${preview.group?.prefixes.join(', ') ?? ''} of ${a.node} into route group ${a.group}`;
  if (a.preview)
    return say(
      a,
      { preview: true, changedNodes: preview.changedNodes, group: preview.group, forwarding: preview.forwarding },
      `would approve ${what}: ${whoChanges(preview.changedNodes)}${forwardingLines(preview.forwarding)}\n(preview: nothing changed)`,
    );
  await confirmChange(
    a.yes,
    `Approve ${what}? ${whoChanges(preview.changedNodes)}${forwardingLines(preview.forwarding)}`,
    'pass --yes to approve (or --preview to see what it does)',
  );
  const r = await ask(false);
  say(
    a,
    { stateVersion: r.stateVersion, changedNodes: r.changedNodes, group: r.group, forwarding: r.forwarding },
    `approved ${what} (state version ${r.stateVersion}): ${whoChanges(r.changedNodes)}${forwardingLines(r.forwarding)}`,
  );
}

export async function routeRemove(a: RemoteArgs & Out & Change & { name: string }): Promise<void> {
  const preview = await withAdmin(a, (c, network) => c.call('removeRouteGroup', { network, name: a.name, preview: true }));
  if (a.preview)
    return say(
      a,
      { preview: true, changedNodes: preview.changedNodes, forwarding: preview.forwarding },
      `would remove route group ${a.name}: ${whoChanges(preview.changedNodes)}${forwardingLines(preview.forwarding)}\n(preview: nothing changed)`,
    );
  await confirmChange(
    a.yes,
    `Remove route group ${a.name}? ${whoChanges(preview.changedNodes)}${forwardingLines(preview.forwarding)}`,
    'pass --yes to remove it (or --preview to see what it does)',
  );
  const r = await withAdmin(a, (c, network) => c.call('removeRouteGroup', { network, name: a.name, preview: false }));
  say(
    a,
    { stateVersion: r.stateVersion, changedNodes: r.changedNodes, forwarding: r.forwarding },
    `route group ${a.name} removed (state version ${r.stateVersion}): ${whoChanges(r.changedNodes)}${forwardingLines(r.forwarding)}`,
  );
}

/** `meshp node exit-node NODE NAME | --off | --clear` (ADR 0039): the admin's setting of the exit node a node uses, previewed, confirmed. */
export async function nodeExitNode(a: RemoteArgs & Out & Change & { node: string; group?: string; off?: boolean; clear?: boolean }): Promise<void> {
  const group = a.group ? String(a.group) : '';
  const given = [group !== '', !!a.off, !!a.clear].filter(Boolean).length;
  if (given !== 1)
    throw usage("node exit-node NODE: give the exit node NAME, --off (none, whatever its agent asks) or --clear (its agent's --exit-node holds)");
  const ask = (preview: boolean) => withAdmin(a, (c, network) => c.call('setExitNode', { network, node: a.node, group, off: !!a.off, preview }));
  const what = a.off ? `no exit node for ${a.node}` : group ? `exit node ${group} for ${a.node}` : `the admin's exit node setting of ${a.node} cleared`;
  const uses = (r: { exitNode: string; reason: string }) =>
    r.exitNode ? `${a.node} uses ${r.exitNode} (${r.reason})` : `${a.node} uses no exit node${r.reason ? ` (${r.reason})` : ''}`;
  const preview = await ask(true);
  if (a.preview)
    return say(
      a,
      { preview: true, changedNodes: preview.changedNodes, exitNode: preview.exitNode, reason: preview.reason },
      `would set ${what}: ${whoChanges(preview.changedNodes)}; ${uses(preview)}\n(preview: nothing changed)`,
    );
  await confirmChange(a.yes, `Set ${what}? ${whoChanges(preview.changedNodes)}; ${uses(preview)}`, 'pass --yes to set it (or --preview to see what it does)');
  const r = await ask(false);
  say(
    a,
    { stateVersion: r.stateVersion, changedNodes: r.changedNodes, exitNode: r.exitNode, reason: r.reason },
    `${what} (state version ${r.stateVersion}): ${whoChanges(r.changedNodes)}; ${uses(r)}`,
  );
}

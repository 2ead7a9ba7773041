/** The admin commands' work: one Admin call each, a table or one JSON document. */
import { readFileSync, statSync } from 'node:fs';
import { MeshpError, type ModuleDecl } from '@meshp/core';
import { inputTooLarge, usage } from '@meshp/core/util';
import { declarationToWire } from '@meshp/core/delta';
import { readCatalogueFile } from '@meshp/core/schema';
import { checkManifest, renderModule, settingsNamed } from '@meshp/core/catalogue';
import { confirmChange, say, table, type Change, type Out } from '../output.js';
import { untakeJson, untakeLines } from './untake.js';
import { present, withAdmin, type RemoteArgs } from './admin.js';
import { dnsLine } from '../host/render.js';
import { modeName, nodeDetail, nodeJson, nodesTable, sentTable, type WireNodeStatus } from './render.js';

export function parseTtl(ttl: string, flag = '--ttl'): number {
  const m = /^(\d+)\s*(s|m|h|d)?$/.exec(ttl.trim());
  if (!m) throw usage(`${flag} ${ttl} is not a duration (90s, 30m, 1h, 7d)`);
  return Number(m[1]) * { s: 1, m: 60, h: 3600, d: 86400 }[(m[2] ?? 's') as 's' | 'm' | 'h' | 'd'];
}

/** Input files are bounded before they are parsed. */
const MAX_INPUT_BYTES = 16 * 1024 * 1024;

export function readJson(file: string): unknown {
  let text: string;
  try {
    if (statSync(file).size > MAX_INPUT_BYTES) throw inputTooLarge(`${file} is larger than ${MAX_INPUT_BYTES} bytes`);
    text = readFileSync(file, 'utf8');
  } catch (cause) {
    if (cause instanceof MeshpError) throw cause;
    throw usage(`${file} is not readable`, { cause });
  }
  try {
    return JSON.parse(text);
  } catch (cause) {
    throw usage(`${file} is not JSON`, { cause });
  }
}

export async function tokenCreate(
  a: RemoteArgs & Out & { adopted: boolean; ttl: string; tags: string[]; reusable?: boolean; uses?: number; ephemeral?: boolean; grace?: string },
): Promise<void> {
  const ttlSeconds = parseTtl(a.ttl);
  // Checked here for the message, and by the controller (a count out of range, a flag without its mode).
  if (a.uses !== undefined && !(Number.isInteger(a.uses) && a.uses >= 1)) throw usage(`--uses ${a.uses} is not a whole number of nodes, 1 or more`);
  if (a.uses !== undefined && !a.reusable) throw usage('--uses is for a reusable token: add --reusable');
  if (a.grace !== undefined && !a.ephemeral) throw usage('--grace is for an ephemeral token: add --ephemeral');
  const ephemeralGraceSeconds = a.grace !== undefined ? parseTtl(a.grace, '--grace') : 0;
  const r = await withAdmin(a, (c, network) =>
    c.call('createToken', {
      network,
      mode: a.adopted ? 1 : 2,
      ttlSeconds,
      tags: a.tags,
      reusable: !!a.reusable,
      maxUses: a.uses ?? 0,
      ephemeral: !!a.ephemeral,
      ephemeralGraceSeconds,
    }),
  );
  say(a, { token: r.token, expiresAt: r.expiresAt, id: r.id || null, reusable: !!a.reusable, ephemeral: !!a.ephemeral }, r.token);
}

/** Nodes asked for a page at a time: a large network's list is over one message's limit. */
const NODES_PAGE = 500;

export async function nodeList(a: RemoteArgs & Out): Promise<void> {
  const nodes = await withAdmin(a, async (c, network) => {
    const all = [];
    let pageToken = '';
    do {
      const r = await c.call('listNodes', { network, pageSize: NODES_PAGE, pageToken });
      all.push(...r.nodes);
      pageToken = r.nextPageToken;
    } while (pageToken);
    return all;
  });
  say(a, { nodes: nodes.map(nodeJson) }, nodes.length ? nodesTable(nodes) : 'no nodes');
}

export async function nodeShow(a: RemoteArgs & Out & { node: string }): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('showNode', { network, node: a.node }));
  const node = present(r.node, 'node');
  const sent = r.recentDeltas;
  const resources = r.resources;
  const fw = r.firewall;
  const firewall = fw ? { kind: fw.kind || 'none', active: fw.active, tables: fw.tables, configFile: fw.configFile || null } : null;
  // The mesh's resolver on the node, as its last report says (issue 25): the line `meshp host status` prints there.
  const dns = r.dns ? { ...r.dns, lastError: r.dns.lastError || null } : null;
  const dnsText = dns ? dnsLine({ dns }) : null;
  // The route groups it serves or uses (issue 26), from the controller.
  const routes = routesOf(r.routes);
  const routeLines = routesText(r.routes, node.name);
  const human = [
    nodeDetail(node),
    `found firewall: ${firewall ? `${firewall.kind}${firewall.active ? ' (active)' : ' (inactive)'}; tables ${firewall.tables.join(', ') || '-'}; config ${firewall.configFile ?? '-'}` : 'not reported yet'}`,
    ...(dnsText ? [dnsText] : []),
    ...routeLines,
    `last preview: ${node.lifecycle?.previewId || node.convergePreviewId || 'none'}; last report ${r.reportedAt || 'none'}`,
    ...(node.lifecycle?.steps.length ? ['lifecycle steps:', ...node.lifecycle.steps.map((s) => `  -> ${s}`)] : []),
    ...(node.lifecycle?.state === 'refused' ? [`refused: ${node.lifecycle.code}: ${node.lifecycle.message}`] : []),
    ...untakeLines(r),
    '',
    'resources:',
    resources.length
      ? table(
          ['RESOURCE', 'MODULE', 'STATE', 'REASON'],
          resources.map((x) => [x.key, x.module || '-', x.state, x.reason || '']),
        )
      : '  none reported',
    '',
    'last deltas sent:',
    sentTable(sent),
  ];
  say(
    a,
    {
      node: nodeJson(node),
      firewall,
      resources: resources.map((x) => ({ key: x.key, kind: x.kind, module: x.module, state: x.state, ...(x.reason ? { reason: x.reason } : {}) })),
      reportedAt: r.reportedAt || null,
      ...untakeJson(r),
      dns,
      routes,
      recentDeltas: sent,
    },
    human.join('\n'),
  );
}

export async function moduleChange(a: RemoteArgs & Out & Change & { act: 'assign' | 'unassign' | 'take'; node: string; module: string }): Promise<void> {
  const method = ({ assign: 'assignModule', unassign: 'unassignModule', take: 'takeModule' } as const)[a.act];
  const WHAT = {
    assign: 'its resources are prepared; what is found is held, nothing is overwritten',
    unassign: 'held resources are left in place',
    take: "its cutover, from then on the module's resources converge (files written, containers replaced)",
  } as const;
  const r = await withAdmin(a, async (c, network) => {
    if (a.preview || !a.yes) {
      const now = present((await c.call('showNode', { network, node: a.node })).node, 'node');
      // The verb leads: "assign module motd on node m2 …", in the preview and in the question alike.
      const what = `${a.act} module ${a.module} on node ${a.node} (${modeName(now.mode)}; assigned ${now.assignedModules.join(', ') || '-'}; taken ${now.takenModules.join(', ') || '-'}): ${WHAT[a.act]}`;
      if (a.preview) return { preview: what, node: now };
      await confirmChange(false, `${what}?`, `pass --yes to ${a.act} (or --preview to see what it does)`);
    }
    return c.call(method, { network, node: a.node, module: a.module });
  });
  if ('preview' in r) return say(a, { preview: true, would: r.preview, node: nodeJson(r.node) }, `would ${r.preview}\n(preview: nothing changed)`);
  const node = present(r.node, 'node');
  say(
    a,
    { node: nodeJson(node) },
    `${a.act} ${a.module} on ${a.node}: assigned ${node.assignedModules.join(', ') || '-'}; taken ${node.takenModules.join(', ') || '-'} (${modeName(node.mode)}, state version ${node.stateVersion})`,
  );
}

/**
 * A catalogue file's modules: `{ "modules": […] }`, a list, or one module — or one manifest as
 * `examples/catalogue/` ships them (`kind: Module`), whose placeholders must then be filled already:
 * the catalogue stores ports as numbers, and only genesis fills `{{ports.NAME}}` from its settings.
 */
function catalogueModulesOf(doc: unknown, file: string): ModuleDecl[] {
  if (typeof doc !== 'object' || doc === null || (doc as { kind?: unknown }).kind !== 'Module') return readCatalogueFile(doc) as ModuleDecl[];
  const m = checkManifest(doc, file);
  const named = settingsNamed(m);
  if (named.length > 0) {
    throw new MeshpError(
      'MESHP_DECLARATION_INVALID',
      `module ${m.name} (${file}) names ${named.map((n) => `{{${n}}}`).join(', ')}: a placeholder is filled from a node's settings by genesis only; write the value in a copy of the file, or define the module with genesis's catalogue`,
    );
  }
  const { taken: _taken, ...def } = renderModule(m, { ports: {} }, false);
  return readCatalogueFile(def) as ModuleDecl[];
}

export async function catalogueAdd(a: RemoteArgs & Out & Change & { file: string }): Promise<void> {
  // Checked here by the one schema before anything is sent (and again by the controller before it stores).
  const list = catalogueModulesOf(readJson(a.file), a.file);
  const modules = declarationToWire({
    apiVersion: 'meshp/v1',
    node: 'catalogue',
    mode: 'converged',
    settings: { ports: {} },
    modules: list.map((m) => ({ ...m, taken: false })),
  }).modules;
  const names = modules.map((m) => m.name);
  if (a.preview)
    return say(
      a,
      { preview: true, modules: names },
      `would define ${names.join(', ')} in the catalogue of ${a.network ?? 'default'}; nodes that have them assigned get them at once\n(preview: nothing changed)`,
    );
  await confirmChange(a.yes, `Define ${names.join(', ')} in the catalogue?`, 'pass --yes to define them (or --preview to see what it does)');
  const r = await withAdmin(a, (c, network) => c.call('addCatalogue', { network, modules }));
  say(a, { stateVersion: r.stateVersion, modules: r.modules }, `defined ${r.modules.join(', ')} (state version ${r.stateVersion})`);
}

/**
 * Doctor's one line: never "converged" over a refusal, a silent agent or a change of mode still under
 * way, never "in sync" over a tunnel that carries nothing; a tunnel not observed says so.
 */
export function verdictOf(node: WireNodeStatus, hashMatches: boolean): string {
  const detail = node.statusDetail ? `: ${node.statusDetail}` : '';
  switch (node.status) {
    case 'expired':
      return `expired${detail}`;
    case 'silent':
      return `silent${detail}`;
    case 'pending':
      return 'pending: the agent has not reported yet';
    case 'refusing':
      return `refusing${detail}`;
    case 'diverged':
      return `diverged${detail}`;
    case 'changing':
      return `changing${detail}`;
    case 'no-tunnel':
      return `no tunnel${detail}`;
    case 'no-handshake':
      return `no-handshake${detail}`;
    case 'peer-unreachable':
      return `peer-unreachable${detail}`;
  }
  if (!hashMatches) return "the agent's last hash differs from the one expected: a snapshot is due";
  if (node.gap > 0) return `behind by ${node.gap}`;
  const synced = 'in sync: the agent acked the current version with the expected hash, and its last reconcile was ok';
  return node.status === 'unverified' ? `${synced}; its tunnel is unverified${detail}` : synced;
}

type WireRoute = { group: string; role: string; prefixes: string[]; primary: string };
const routesOf = (rs: readonly WireRoute[]) => rs.map((x) => ({ group: x.group, role: x.role, prefixes: [...x.prefixes], primary: x.primary || null }));
/** One line per route group the node serves or uses (issue 26), the primary named. */
const routesText = (rs: readonly WireRoute[], self: string): string[] =>
  routesOf(rs).map((x) => `route ${x.group}: ${x.role} ${x.prefixes.join(', ')}; primary ${x.primary ?? 'none'}${x.primary === self ? ' (this node)' : ''}`);

export async function doctor(a: RemoteArgs & Out & { node: string }): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('doctor', { network, node: a.node }));
  const node = present(r.node, 'node');
  const sent = r.recentDeltas;
  const applied = new Map(r.agentApplied.map((x) => [x.toVersion, x]));
  const matched = sent.map((s) => {
    const got = applied.get(s.toVersion);
    return { ...s, applied: got !== undefined, agentHash: got?.stateHash ?? '', hashMatches: got ? got.stateHash === s.expectedHash : false };
  });
  const held = r.resources.filter((x) => x.state === 'held' || x.state === 'changed');
  const verdict = verdictOf(node, r.hashMatches);
  const doc = {
    verdict,
    node: nodeJson(node),
    deltas: matched,
    expectedHash: r.expectedHash,
    hashMatches: r.hashMatches,
    snapshotPending: r.snapshotPending,
    logFloor: r.logFloor,
    reportedAt: r.reportedAt || null,
    held: held.map((x) => ({ key: x.key, module: x.module, state: x.state })),
    listening: r.listening,
    published: r.published,
    dns: r.dns ? { ...r.dns, lastError: r.dns.lastError || null } : null,
    routes: routesOf(r.routes),
    // issue 29: per taken module, whether untake is possible and what blocks it (the agent's preview).
    ...untakeJson(r),
  };
  // The mesh's resolver and how the machine's resolver asks it (issue 25): node show's line.
  const dnsText = doc.dns ? dnsLine({ dns: doc.dns }) : null;
  const human = [
    nodeDetail(node),
    ...routesText(r.routes, node.name),
    `${verdict}; snapshot pending ${r.snapshotPending ? 'yes' : 'no'}; log reaches back to version ${r.logFloor}; last report ${r.reportedAt || 'none'}`,
    '',
    'deltas sent, matched by version with what the agent applied:',
    table(
      ['FROM', 'TO', 'COMPONENTS', 'EXPECTED HASH', 'APPLIED', 'AGENT HASH'],
      matched.map((m) => [
        m.fromVersion === 0 ? 'snapshot' : m.fromVersion,
        m.toVersion,
        m.components.join(',') || '-',
        m.expectedHash.slice(0, 12),
        m.applied ? (m.hashMatches ? 'yes' : 'yes, hash differs') : 'no',
        m.agentHash.slice(0, 12) || '-',
      ]),
    ),
    '',
    held.length ? `held: ${held.map((x) => `${x.key} (${x.module}, ${x.state})`).join('; ')}` : 'held: none',
    `listening: ${r.listening.map((l) => `${l.protocol}/${l.address}:${l.port}${l.process ? ` ${l.process}` : ''}`).join(', ') || 'none reported'}`,
    `published: ${r.published.map((p) => `${p.container} ${p.hostPort}->${p.containerPort}/${p.protocol}`).join(', ') || 'none reported'}`,
    ...(dnsText ? [dnsText] : []),
    ...untakeLines(r),
  ];
  say(a, doc, human.join('\n'));
}

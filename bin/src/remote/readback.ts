/**
 * `meshp catalogue list | show | remove` and `meshp token list | revoke` (issue 33): what the
 * controller holds, read back; a removal or a revocation says what it will change first, from the
 * controller's own answer, and `--preview` stops there.
 */
import { WIRE_MODE } from '@meshp/core/delta';
import { notFound, usage } from '@meshp/core/util';
import type { wire } from '@meshp/transport-grpc';
import { confirmChange, say, table, type Change, type Out } from '../output.js';
import { present, withAdmin, type RemoteArgs } from './admin.js';
import { modeName } from './render.js';

const list = (xs: string[]): string => xs.join(', ') || '-';

function moduleJson(m: wire.CatalogueModuleInfo) {
  return { name: m.name, files: m.files, containers: m.containers, openings: m.openings, assignedTo: m.assignedTo, takenBy: m.takenBy, settings: m.settings };
}

export async function catalogueList(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('listCatalogue', { network }));
  const rows = r.modules.map((m) => [m.name, m.files, m.containers, m.openings, list(m.settings), list(m.assignedTo), list(m.takenBy)]);
  say(
    a,
    { modules: r.modules.map(moduleJson) },
    r.modules.length ? table(['MODULE', 'FILES', 'CONTAINERS', 'OPENINGS', 'SETTINGS', 'ASSIGNED TO', 'TAKEN BY'], rows) : 'no modules in the catalogue',
  );
}

function describeModule(m: wire.CatalogueModuleInfo): string {
  return [
    `module ${m.name}: ${m.files} file(s), ${m.containers} container(s), ${m.openings} opening(s)`,
    `assigned to ${list(m.assignedTo)}; taken by ${list(m.takenBy)}`,
    `settings it names (filled from each node's own): ${list(m.settings)}`,
  ].join('\n');
}

export async function catalogueShow(a: RemoteArgs & Out & { module: string }): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('showCatalogueModule', { network, module: a.module }));
  const m = present(r.module, 'module');
  const definition = JSON.parse(r.definitionJson || 'null') as unknown;
  say(a, { module: moduleJson(m), definition }, `${describeModule(m)}\ndefinition, as stored:\n${JSON.stringify(definition, null, 2)}`);
}

export async function catalogueRemove(a: RemoteArgs & Out & Change & { module: string }): Promise<void> {
  const r = await withAdmin(a, async (c, network) => {
    const m = present((await c.call('showCatalogueModule', { network, module: a.module })).module, 'module');
    // Said from the controller's answer; the controller refuses the removal itself too (MESHP_MODULE_ASSIGNED).
    const what = m.assignedTo.length
      ? `remove module ${m.name} from the catalogue of ${network}: refused while it is assigned to ${list(m.assignedTo)} (unassign it there first)`
      : `remove module ${m.name} from the catalogue of ${network} (assigned to no node; ${m.files} file(s), ${m.containers} container(s), ${m.openings} opening(s))`;
    if (a.preview) return { kind: 'preview' as const, preview: what, module: m };
    await confirmChange(a.yes, `${what}?`, 'pass --yes to remove it (or --preview to see what it does)');
    return { kind: 'removed' as const, removed: await c.call('removeCatalogueModule', { network, module: a.module }), module: m };
  });
  if (r.kind === 'preview') return say(a, { preview: true, would: r.preview, module: moduleJson(r.module) }, `would ${r.preview}\n(preview: nothing changed)`);
  say(
    a,
    { removed: a.module, stateVersion: r.removed.stateVersion },
    `removed module ${a.module} from the catalogue (state version ${r.removed.stateVersion})`,
  );
}

function tokenJson(t: wire.EnrolmentTokenInfo) {
  return {
    id: t.id,
    network: t.network,
    adopted: t.mode === WIRE_MODE.ADOPTED,
    mode: modeName(t.mode),
    tags: t.tags,
    createdAt: t.createdAt || null,
    expiresAt: t.expiresAt,
    state: t.state,
    usedBy: t.usedBy || null,
    usedAt: t.usedAt || null,
    confirmed: t.confirmed,
    revokedAt: t.revokedAt || null,
    reusable: t.reusable,
    uses: t.uses,
    maxUses: t.maxUses || 1,
    ephemeral: t.ephemeral,
    ephemeralGraceSeconds: t.ephemeral ? t.ephemeralGraceSeconds : null,
  };
}

/** The state column: what became of it, with by whom and when where that is known. */
function tokenStateShown(t: wire.EnrolmentTokenInfo): string {
  const kind = `${t.reusable ? ` (reusable, ${t.uses}/${t.maxUses} used)` : ''}${t.ephemeral ? ` (ephemeral, grace ${t.ephemeralGraceSeconds}s)` : ''}`;
  return tokenStateWord(t) + kind;
}

function tokenStateWord(t: wire.EnrolmentTokenInfo): string {
  if (t.state === 'used' && t.reusable) return 'USED UP';
  if (t.state === 'in-use') return 'in use';
  if (t.state === 'used') return `USED by ${t.usedBy} at ${t.usedAt}${t.confirmed ? '' : ' (its node has not opened its stream yet)'}`;
  if (t.state === 'revoked') return `REVOKED at ${t.revokedAt}`;
  if (t.state === 'expired') return 'EXPIRED';
  return 'unused';
}

export async function tokenList(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('listEnrolmentTokens', { network }));
  const rows = r.tokens.map((t) => [
    t.id,
    t.network,
    t.mode === WIRE_MODE.ADOPTED ? 'yes' : 'no',
    list(t.tags),
    t.createdAt || '-',
    t.expiresAt,
    tokenStateShown(t),
  ]);
  say(
    a,
    { tokens: r.tokens.map(tokenJson) },
    r.tokens.length ? table(['ID', 'NETWORK', 'ADOPTED', 'TAGS', 'CREATED', 'EXPIRES', 'STATE'], rows) : `no tokens in ${a.network ?? 'default'}`,
  );
}

export async function tokenRevoke(a: RemoteArgs & Out & Change & { id: string }): Promise<void> {
  const id = a.id.trim().toLowerCase();
  if (!/^[0-9a-f]{4,64}$/.test(id)) throw usage(`token id ${JSON.stringify(a.id)} is not one: the ID column of meshp token list (hex digits)`);
  const r = await withAdmin(a, async (c, network) => {
    const found = (await c.call('listEnrolmentTokens', { network })).tokens.filter((t) => t.id.startsWith(id) || id.startsWith(t.id));
    if (found.length === 0) throw notFound('token', id, network);
    if (found.length > 1) throw usage(`token id ${id} names ${found.length} tokens: give more of it`);
    const t = found[0]!;
    const what =
      t.state === 'used'
        ? `revoke token ${t.id}: refused, it was used by node ${t.usedBy} at ${t.usedAt} (it enrols no one else; meshp node remove ${t.usedBy} takes the node out)`
        : `revoke token ${t.id} (${tokenStateShown(t)}; ${t.mode === WIRE_MODE.ADOPTED ? 'adopted' : 'converged'}; tags ${list(t.tags)}; expires ${t.expiresAt}): an enrolment with it is refused from then on`;
    if (a.preview) return { kind: 'preview' as const, preview: what, token: t };
    await confirmChange(a.yes, `${what}?`, 'pass --yes to revoke it (or --preview to see what it does)');
    return { kind: 'revoked' as const, revoked: present((await c.call('revokeEnrolmentToken', { network, id: t.id })).token, 'token') };
  });
  if (r.kind === 'preview') return say(a, { preview: true, would: r.preview, token: tokenJson(r.token) }, `would ${r.preview}\n(preview: nothing changed)`);
  say(a, { token: tokenJson(r.revoked) }, `token ${r.revoked.id} revoked at ${r.revoked.revokedAt}: an enrolment with it is refused`);
}

/**
 * The audit log (issue 28): every admin call that changes something is recorded once it is made, in
 * the controller's store (SQLite or PostgreSQL: an AuditBook), with its time, its actor (the admin
 * credential's name: "admin", the one a controller makes), its network, what it changed and the
 * state version it left; and logged as one JSON line. Entries older than the retention are trimmed
 * at each append, by age (never by the delta log's depth). `ListAudit` reads them back.
 */
import type { AdminMethods, AuditBook, AuditEntry, AuditQuery } from '@meshp/core';
import type { AdminApi, AdminRequest } from '@meshp/protocol';
import type { Controller } from '../controller.js';
import type { Logger } from './log.js';

/** The admin methods that change something: each is recorded; the others (reads, previews) are not. */
export const CHANGES: ReadonlySet<string> = new Set<string>([
  'assignModule',
  'unassignModule',
  'takeModule',
  'untakeModule',
  'releaseModule',
  'setMode',
  'setPolicy',
  'createToken',
  'addCatalogue',
  'convergeNode',
  'removeNode',
  'renameNode',
  'setTags',
  'expireNode',
  'renewNode',
  'setNodeLifetime',
  'rekeyNode',
  'createNetwork',
  'removeNetwork',
  'removeCatalogueModule',
  'revokeEnrolmentToken',
  'setRouteGroup',
  'removeRouteGroup',
  'approveRoute',
  'setRelay',
  'removeRelay',
  'setExitNode',
  'setDns',
  'createAdmin',
  'revokeAdmin',
]);

/** The default retention: 90 days. */
export const DEFAULT_AUDIT_RETENTION_SECONDS = 90 * 86_400;

/** The most entries one ListAudit answers. */
export const MAX_AUDIT_PAGE = 1_000;

export const ADMIN_ACTOR = 'admin';

type Req = Record<string, unknown>;

const str = (r: Req, k: string): string => (typeof r[k] === 'string' ? (r[k] as string) : '');

/** What the change is, in one line; `before`: what was there (the policy's rules), read before the change. */
function summaryOf(method: string, r: Req, before: string): string {
  const node = str(r, 'node');
  const rules = (n: unknown) => `${Array.isArray(n) ? n.length : 0} rule(s)`;
  switch (method) {
    case 'setPolicy':
      return `policy: ${before} -> ${rules(r.rules)}, ${Array.isArray(r.tests) ? r.tests.length : 0} test(s)${str(r, 'previewId') ? ` (preview ${str(r, 'previewId')})` : ''}`;
    case 'assignModule':
    case 'unassignModule':
    case 'takeModule':
      return `${method.replace('Module', '')} module ${str(r, 'module')} on ${node}`;
    case 'releaseModule':
      return `release module ${str(r, 'module')} on ${node}${r.restore === true ? ` --restore (preview ${str(r, 'previewId')})` : ''}`;
    case 'untakeModule':
      return `untake module ${str(r, 'module')} on ${node} (preview ${str(r, 'previewId')})`;
    case 'setMode':
      return `mode of ${node}: ${before} -> ${r.mode === 1 ? 'adopted' : 'converged'}`;
    case 'convergeNode':
      return `converge ${node}${str(r, 'previewId') ? ` (preview ${str(r, 'previewId')})` : ''}`;
    case 'setTags':
      return `tags of ${node}: ${before || '-'} -> ${(Array.isArray(r.tags) ? [...new Set(r.tags as string[])].sort() : []).join(',') || '-'}${str(r, 'previewId') ? ` (preview ${str(r, 'previewId')})` : ''}`;
    case 'createToken':
      return `token created (tags ${(Array.isArray(r.tags) ? r.tags : []).join(',') || 'none'}${r.reusable === true ? `, reusable ${Number(r.maxUses) || 'default'} use(s)` : ''}${r.ephemeral === true ? `, ephemeral grace ${Number(r.ephemeralGraceSeconds) || 'default'}` : ''})`;
    case 'addCatalogue':
      return `catalogue add ${(Array.isArray(r.modules) ? r.modules : []).map((m) => (m as { name?: string }).name).join(', ')}`;
    case 'revokeEnrolmentToken':
      return `token ${str(r, 'id')} revoked`;
    case 'setRouteGroup': {
      const g = (r.group ?? {}) as { name?: string; prefixes?: string[]; viaPeers?: string[] };
      return `route group ${g.name ?? ''} set: ${(g.prefixes ?? []).join(',')} via ${(g.viaPeers ?? []).join(',')}`;
    }
    case 'approveRoute':
      return `route approve ${(Array.isArray(r.prefixes) && r.prefixes.length ? r.prefixes : ['every advertised prefix']).join(',')} of ${node} into group ${str(r, 'group')}`;
    case 'setDns': {
      const d = (r.dns ?? {}) as { domain?: string; records?: unknown[]; split?: unknown[]; nameservers?: unknown[] };
      const n = (xs: unknown[] | undefined) => (Array.isArray(xs) ? xs.length : 0);
      return `dns set: domain ${d.domain || 'default'}, ${n(d.records)} record(s), ${n(d.split)} split domain(s), ${n(d.nameservers)} nameserver(s)`;
    }
    case 'createAdmin':
      return `admin credential ${str(r, 'name')} created (role ${str(r, 'role') || 'admin'})`;
    case 'revokeAdmin':
      return `admin credential ${str(r, 'name')} revoked`;
    case 'removeRouteGroup':
      return `route group ${str(r, 'name')} removed`;
    case 'setRelay': {
      // The secret's value is never written here: only whether one was given.
      const x = (r.relay ?? {}) as { id?: string; address?: string; port?: number; transport?: string; secretName?: string };
      return `relay ${x.id ?? ''} set: ${x.address ?? ''}:${x.port ?? 0}/${x.transport || 'udp'}, secret ${x.secretName ?? ''}${str(r, 'secret') ? ' (given)' : ' (held)'}`;
    }
    case 'removeRelay':
      return `relay ${str(r, 'id')} removed`;
    default:
      return nodeSummaryOf(method, node, r, before) ?? `${method}${node ? ` ${node}` : ''}`;
  }
}

/** A change of one node's credential, name, membership or exit node, in one line; undefined: another kind of change. */
function nodeSummaryOf(method: string, node: string, r: Req, before: string): string | undefined {
  switch (method) {
    case 'expireNode':
      return `expire ${node} (its credential ended now: its peers drop it)`;
    case 'renewNode':
      return `renew ${node}: expiry ${before || 'never'} -> ${typeof r.seconds === 'number' && r.seconds ? `${r.seconds} s` : "the network's node lifetime"} from now`;
    case 'setNodeLifetime':
      return `node lifetime: ${before} s -> ${String(r.seconds)} s`;
    case 'rekeyNode':
      return `rekey ${node}: a new tunnel key asked (the key was ${before || 'none'})`;
    case 'renameNode':
      return `rename ${node} -> ${str(r, 'newName')}`;
    case 'removeNode':
      return `remove ${node}${r.ephemeral === true ? ' (ephemeral: no stream for longer than its grace)' : ''}`;
    case 'setExitNode':
      return `exit node of ${node}: ${r.off === true ? 'off' : str(r, 'group') || "the agent's own (admin setting cleared)"}`;
    default:
      return undefined;
  }
}

/** What there was before the change, for its summary: read before the change is made. */
function beforeOf(controller: Controller, method: string, r: Req, network: string): string {
  try {
    if (method === 'setPolicy') return `${controller.policy(network).length} rule(s)`;
    if (method === 'setTags') return [...(controller.member(network, str(r, 'node'))?.tags ?? [])].sort().join(',');
    if (method === 'renewNode') return controller.member(network, str(r, 'node'))?.expiresAt ?? '';
    if (method === 'setNodeLifetime') return String(controller.nodeLifetime(network).seconds);
    if (method === 'rekeyNode') return controller.member(network, str(r, 'node'))?.tunnelKey ?? '';
    if (method === 'setMode') return controller.member(network, str(r, 'node'))?.mode ?? 'unknown';
  } catch {
    // A network that does not exist: the change is refused, and nothing is recorded.
  }
  return '';
}

export interface AuditDeps {
  book: AuditBook;
  controller: Controller;
  log: Logger;
  retentionSeconds: number;
}

/**
 * The changes written to the hosting's own tables (tokens, admin credentials), not the controller's
 * store: their audit row is appended after them (see auditedChange).
 */
export const HOSTING_CHANGES: ReadonlySet<string> = new Set<string>(['createToken', 'revokeEnrolmentToken', 'createAdmin', 'revokeAdmin']);

/**
 * Runs `call` as one change (`change`: at once against a local store, or committed through
 * `Controller.change` against one across the network) and, when it is a change that was made,
 * records it. A change of the controller's state, on a store that can (SQLite, PostgreSQL): its
 * audit row is written in the change's own transaction (`Controller.atomically`), so the two commit
 * together or not at all — a crash, a refused commit, a guard beaten STALE_RETRIES times leaves
 * neither; one computed again after another replica committed first is recorded once, with the
 * version it finally made; an audit row the store refuses refuses the change. A change of the
 * hosting's tables (HOSTING_CHANGES), or a store without the log in it: recorded once the change is
 * made, and a record refused then is logged (the change stands).
 */
export async function auditedChange<T>(
  a: AuditDeps,
  method: string,
  request: Req,
  network: string,
  change: (fn: () => T) => Promise<T>,
  call: () => T,
  actor: string = ADMIN_ACTOR,
): Promise<T> {
  // A preview changes nothing: it is not recorded.
  if (!CHANGES.has(method) || request.preview === true) return change(call);
  let entry: AuditEntry | null = null;
  const made = (): T => {
    entry = null;
    const before = beforeOf(a.controller, method, request, network);
    const out = call();
    entry = {
      at: new Date().toISOString(),
      actor,
      network,
      method,
      node: str(request, 'node') || null,
      summary: summaryOf(method, request, before),
      stateVersion: a.controller.networks().includes(network) ? a.controller.stateVersion(network) : 0,
    };
    return out;
  };
  if (a.controller.auditsInTransaction && !HOSTING_CHANGES.has(method)) {
    const out = await change(() =>
      a.controller.atomically(() => {
        const out = made();
        a.controller.recordAudit(entry!, trimBefore(a, entry!));
        return out;
      }),
    );
    if (entry) a.log.info({ audit: entry }, 'admin change');
    return out;
  }
  const out = await change(made);
  if (entry) await record(a, entry);
  return out;
}

const trimBefore = (a: AuditDeps, e: AuditEntry): string => new Date(Date.parse(e.at) - a.retentionSeconds * 1000).toISOString();

async function record(a: AuditDeps, entry: AuditEntry): Promise<void> {
  const before = trimBefore(a, entry);
  try {
    if (a.book.appendAuditAsync) await a.book.appendAuditAsync(entry, before);
    else {
      a.book.trimAudit(before);
      a.book.appendAudit(entry);
    }
    a.log.info({ audit: entry }, 'admin change');
  } catch (e) {
    a.log.error({ audit: entry, err: e instanceof Error ? e.message : String(e) }, 'admin change made; the audit log refused its record');
  }
}

export function auditMethods(book: AuditBook): Pick<AdminMethods<AdminApi>, 'listAudit'> {
  return {
    listAudit: (r: AdminRequest<'listAudit'>, net) => ({ entries: book.listAudit(auditQuery(r, net)).map((e) => ({ ...e, node: e.node ?? '' })) }),
  };
}

/** The read a ListAudit request asks for (the page bounded). */
export function auditQuery(r: AdminRequest<'listAudit'>, net: string): AuditQuery {
  return {
    network: net,
    ...(r.since ? { since: r.since } : {}),
    ...(r.node ? { node: r.node } : {}),
    limit: Math.min(r.limit || MAX_AUDIT_PAGE, MAX_AUDIT_PAGE),
  };
}

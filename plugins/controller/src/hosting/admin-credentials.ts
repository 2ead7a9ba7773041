/**
 * Named admin credentials and their roles (issue 28; docs/adr/0034). Every admin call is from an
 * actor: the credential the controller made on its first start is `admin` (role admin); each one
 * made with `meshp admin create NAME` is its own secret, kept by its hash in the controller's store
 * (SQLite, or PostgreSQL for replicas), looked up at each call: a revoked one is refused at its next
 * call, on every replica. The role is checked by one function, `mayCall` (and `canChange` for a UI
 * that wants to know whether to offer changes at all): `read-only` calls the reads and previews only.
 */
import { randomBytes } from 'node:crypto';
import { MeshpError, type AdminActor, type AdminCredentialBook, type AdminCredentialRecord, type AdminMethods, type AdminRole } from '@meshp/core';
import { hashSecret } from '@meshp/core/store';
import { notFound, usage } from '@meshp/core/util';
import type { AdminApi, AdminRequest } from '@meshp/protocol';
import { formatAdminCredential, secretMatches } from './credential.js';
import { NODE_NAME } from './enrolment.js';

export const ADMIN_ROLES: readonly AdminRole[] = ['admin', 'read-only'];

/** The actor of the credential a controller makes on its first start: not a name `admin create` gives. */
export const BOOTSTRAP_ADMIN: AdminActor = { name: 'admin', role: 'admin' };

/**
 * The admin methods that change nothing: a read-only credential calls these, and no other (a method
 * added later is a change until it is named here: refused to read-only, never let through by default).
 */
export const READ_METHODS: ReadonlySet<string> = new Set([
  'listNodes',
  'showNode',
  'doctor',
  'previewConverge',
  'listNetworks',
  'listCatalogue',
  'showCatalogueModule',
  'listEnrolmentTokens',
  'getPolicy',
  'previewPolicy',
  'testPolicy',
  'listAudit',
  'getDns',
  'listRouteGroups',
  'listRelays',
  'listAdmins',
  'previewUntake',
  'whoAmI',
  'getNodeLifetime',
]);

/** Changes that take `preview: true` and then change nothing (the nodes that would change said). */
const PREVIEWABLE: ReadonlySet<string> = new Set([
  'setDns',
  'setRouteGroup',
  'removeRouteGroup',
  'approveRoute',
  'releaseModule',
  'setTags',
  'setRelay',
  'removeRelay',
  'expireNode',
  'renewNode',
  'rekeyNode',
  'setExitNode',
]);

/** Whether the actor may change anything at all (a console offers its change forms only then). */
export function canChange(actor: AdminActor): boolean {
  return actor.role === 'admin';
}

/** WhoAmI's answer: the caller's name and role, and whether it may change anything (answered by the handler, which alone knows the caller). */
export function whoAmI(actor: AdminActor): { name: string; role: string; mayChange: boolean } {
  return { name: actor.name, role: actor.role, mayChange: canChange(actor) };
}

/** Whether this call changes nothing: a read, or a change asked as a preview. */
export function isRead(method: string, request: object): boolean {
  return READ_METHODS.has(method) || (PREVIEWABLE.has(method) && (request as { preview?: unknown }).preview === true);
}

/** The one role check: an admin calls anything, a read-only credential only what changes nothing. */
export function mayCall(actor: AdminActor, method: string, request: object): boolean {
  return canChange(actor) || isRead(method, request);
}

/** Refused MESHP_FORBIDDEN, naming the actor and its role, when the actor may not make this call. */
export function checkRole(actor: AdminActor, method: string, request: object): void {
  if (!mayCall(actor, method, request))
    throw new MeshpError(
      'MESHP_FORBIDDEN',
      `the admin credential ${actor.name} is read-only: ${method} changes the controller (reads and previews only; an admin credential makes changes)`,
    );
}

/** A secret of the shape credential.ts makes (a malformed one costs no store read). */
const SECRET = /^[A-Za-z0-9_-]{20,200}$/;

/** Whether a presented secret could be an admin credential at all (else refused without a store read). */
export const couldBeAdmin = (credential: string): boolean => SECRET.test(credential);

export interface AdminAuthDeps {
  /** The bootstrap credential's secret. */
  secret: string;
  /** The named credentials; absent: the bootstrap one alone. */
  book?: AdminCredentialBook;
}

/**
 * Who presented this secret: the bootstrap credential, or a named one in force (read from the store
 * now, not from a cache: a revocation holds at the next call). Refused MESHP_AUTH_FAILED otherwise;
 * a revoked one is told so.
 */
export async function actorOf(d: AdminAuthDeps, credential: string): Promise<AdminActor> {
  if (credential && secretMatches(credential, d.secret)) return BOOTSTRAP_ADMIN;
  const r = d.book && SECRET.test(credential) ? await lookup(d.book, hashSecret(credential)) : null;
  if (!r) throw new MeshpError('MESHP_AUTH_FAILED', 'the admin credential is not one this controller made');
  if (r.revokedAt) throw new MeshpError('MESHP_AUTH_FAILED', `the admin credential ${r.name} was revoked at ${r.revokedAt}`);
  return { name: r.name, role: r.role };
}

const lookup = (book: AdminCredentialBook, hash: string): Promise<AdminCredentialRecord | null> =>
  book.adminBySecretAsync ? book.adminBySecretAsync(hash) : Promise.resolve(book.adminBySecret(hash));

/** The role asked for ('' is admin), checked. */
function roleOf(role: string): AdminRole {
  if (!role) return 'admin';
  const r = ADMIN_ROLES.find((x) => x === role);
  if (!r) throw usage(`role ${JSON.stringify(role)} is not one of ${ADMIN_ROLES.join(', ')}`);
  return r;
}

function nameOf(name: string): string {
  if (!name) throw usage('name is required');
  if (!NODE_NAME.test(name)) throw usage(`admin name ${JSON.stringify(name)} is not valid (letters, digits, - and _, as a node's name)`);
  if (name === BOOTSTRAP_ADMIN.name) throw usage(`${name} is the credential the controller made on its first start: name another`);
  return name;
}

const toWire = (r: AdminCredentialRecord) => ({ name: r.name, role: r.role, createdAt: r.createdAt, revokedAt: r.revokedAt ?? '' });

type Methods = Pick<AdminMethods<AdminApi>, 'createAdmin' | 'listAdmins' | 'revokeAdmin'>;
type AsyncMethods = { [M in keyof Methods]: (r: AdminRequest<M>, net: string) => Promise<ReturnType<Methods[M]>> };

/**
 * CreateAdmin, ListAdmins, RevokeAdmin over the book: synchronous ones (the store on the controller's
 * disk) and, when the book has them, ones answered without the event loop waiting (PostgreSQL).
 * `fingerprint`: the controller certificate's, carried in the credential answered (as in admin.credential).
 */
export function adminCredentialMethods(
  book: AdminCredentialBook | undefined,
  fingerprint: string,
  now: () => Date = () => new Date(),
): { sync: Methods; async: Partial<AsyncMethods> } {
  const none = (): never => {
    throw new MeshpError('MESHP_PLUGIN_INVALID', 'this controller keeps no named admin credentials');
  };
  const fresh = (r: AdminRequest<'createAdmin'>) => {
    const secret = randomBytes(32).toString('base64url');
    const record: AdminCredentialRecord = { name: nameOf(r.name), role: roleOf(r.role), createdAt: now().toISOString(), revokedAt: null };
    return { secret, record };
  };
  const made = (ok: boolean, secret: string, record: AdminCredentialRecord) => {
    if (!ok)
      throw new MeshpError('MESHP_NAME_TAKEN', `an admin credential named ${record.name} exists (or existed: a name is one actor in the audit log for good)`);
    return { admin: toWire(record), credential: formatAdminCredential({ fingerprint, secret }) };
  };
  const revoked = (name: string, r: AdminCredentialRecord | null) => {
    if (!r) throw notFound('admin credential', name);
    return { admin: toWire(r) };
  };
  const need = (name: string) => {
    if (!name) throw usage('name is required');
    return name;
  };
  const sync: Methods = {
    createAdmin: (r) => {
      if (!book) return none();
      const { secret, record } = fresh(r);
      return made(book.addAdmin(hashSecret(secret), record), secret, record);
    },
    listAdmins: () => ({ admins: (book?.listAdmins() ?? []).map(toWire) }),
    revokeAdmin: (r) => {
      if (!book) return none();
      const name = need(r.name);
      return revoked(name, book.revokeAdmin(name, now().toISOString()));
    },
  };
  const out: Partial<AsyncMethods> = {};
  const b = book;
  if (b?.addAdminAsync && b.listAdminsAsync && b.revokeAdminAsync) {
    out.createAdmin = async (r) => {
      const { secret, record } = fresh(r);
      return made(await b.addAdminAsync!(hashSecret(secret), record), secret, record);
    };
    out.listAdmins = async () => ({ admins: (await b.listAdminsAsync!()).map(toWire) });
    out.revokeAdmin = async (r) => {
      const name = need(r.name);
      return revoked(name, await b.revokeAdminAsync!(name, now().toISOString()));
    };
  }
  return { sync, async: out };
}

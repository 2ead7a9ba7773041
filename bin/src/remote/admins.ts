/** `meshp admin create | list | revoke` (issue 28): named admin credentials, each the actor of its calls in the audit log. */
import { closeSync, openSync, rmSync, writeSync } from 'node:fs';
import { MeshpError } from '@meshp/core';
import { notFound } from '@meshp/core/util';
import type { wire } from '@meshp/transport-grpc';
import { confirmChange, say, table, type Change, type Out } from '../output.js';
import { present, withAdmin, type RemoteArgs } from './admin.js';

const adminJson = (x: wire.AdminInfo) => ({ name: x.name, role: x.role, createdAt: x.createdAt, revokedAt: x.revokedAt || null });

export async function adminCreate(a: RemoteArgs & Out & { name: string; role: string; out?: string }): Promise<void> {
  // The file first ('wx': one that is there is refused, never overwritten), so no credential is made that cannot be kept.
  let fd: number | null = null;
  if (a.out) {
    try {
      fd = openSync(a.out, 'wx', 0o600);
    } catch (cause) {
      throw new MeshpError('MESHP_USAGE', `--out ${a.out} cannot be made (${(cause as NodeJS.ErrnoException).code ?? String(cause)}): name a new file`, {
        cause,
      });
    }
  }
  let r;
  try {
    r = await withAdmin(a, (c, network) => c.call('createAdmin', { network, name: a.name, role: a.role }));
    if (fd !== null) writeSync(fd, `${r.credential}\n`);
  } catch (e) {
    // Nothing made, or made and not written: the empty file goes (it was made by this call).
    if (fd !== null) {
      closeSync(fd);
      fd = null;
      rmSync(a.out!, { force: true });
    }
    throw e;
  } finally {
    if (fd !== null) closeSync(fd);
  }
  const x = present(r.admin, 'admin');
  if (a.out)
    return say(a, { admin: adminJson(x), file: a.out }, `admin credential ${x.name} (${x.role}) written to ${a.out}; use it with --credential ${a.out}`);
  say(a, { admin: adminJson(x), credential: r.credential }, r.credential);
}

export async function adminList(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('listAdmins', { network }));
  say(
    a,
    { admins: r.admins.map(adminJson) },
    r.admins.length
      ? table(
          ['NAME', 'ROLE', 'MADE', 'STATE'],
          r.admins.map((x) => [x.name, x.role, x.createdAt, x.revokedAt ? `revoked ${x.revokedAt}` : 'in force']),
        )
      : 'no named admin credentials (only the one the controller made: admin)',
  );
}

export async function adminRevoke(a: RemoteArgs & Out & Change & { name: string }): Promise<void> {
  const r = await withAdmin(a, async (c, network) => {
    const x = (await c.call('listAdmins', { network })).admins.find((y) => y.name === a.name);
    if (!x) throw notFound('admin credential', a.name);
    const what = x.revokedAt
      ? `revoke admin credential ${x.name}: it was revoked at ${x.revokedAt} already (nothing changes)`
      : `revoke admin credential ${x.name} (${x.role}, made ${x.createdAt}): every call with it is refused from then on, on every replica`;
    if (a.preview) return { kind: 'preview' as const, what, admin: x };
    await confirmChange(a.yes, `${what}?`, 'pass --yes to revoke it (or --preview to see what it does)');
    return { kind: 'revoked' as const, admin: present((await c.call('revokeAdmin', { network, name: x.name })).admin, 'admin') };
  });
  if (r.kind === 'preview') return say(a, { preview: true, would: r.what, admin: adminJson(r.admin) }, `would ${r.what}\n(preview: nothing changed)`);
  say(a, { revoked: adminJson(r.admin) }, `admin credential ${r.admin.name} revoked at ${r.admin.revokedAt}`);
}

/** `meshp admin whoami`: who the credential presented is, and whether it may change anything (kubectl auth whoami). */
export async function adminWhoAmI(a: RemoteArgs & Out): Promise<void> {
  const r = await withAdmin(a, (c, network) => c.call('whoAmI', { network }));
  say(
    a,
    { name: r.name, role: r.role, mayChange: r.mayChange },
    `${r.name} (${r.role}): ${r.mayChange ? 'may change the controller' : 'reads and previews only'}`,
  );
}

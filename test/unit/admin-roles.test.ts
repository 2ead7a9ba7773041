/**
 * The read-only role is one check (admin-credentials.ts mayCall): every admin method of the proto is
 * either a read (READ_METHODS) or a change the audit log records (AUDITED_METHODS), never both and
 * never neither — a method added later that is in neither fails here until it is classed. A
 * read-only actor may call the reads and a change asked as a preview; an admin, every method.
 */
import t from 'tap';
import { AUDITED_METHODS, BOOTSTRAP_ADMIN, READ_METHODS, canChange, checkRole, isRead, mayCall } from '@meshp/controller';
import { ADMIN_METHODS } from '@meshp/transport-grpc';

const viewer = { name: 'viewer', role: 'read-only' as const };

t.test('every admin method is a read or an audited change, exactly one', async (t) => {
  for (const m of ADMIN_METHODS) t.ok(READ_METHODS.has(m) !== AUDITED_METHODS.has(m), `${m}: ${READ_METHODS.has(m) ? 'read' : 'change'}`);
  for (const m of [...READ_METHODS, ...AUDITED_METHODS]) t.ok((ADMIN_METHODS as string[]).includes(m), `${m} is a method of the proto`);
});

t.test('the role check', async (t) => {
  t.ok(canChange(BOOTSTRAP_ADMIN), 'the bootstrap credential changes');
  t.notOk(canChange(viewer), 'a read-only one does not');
  for (const m of ADMIN_METHODS) {
    t.ok(mayCall(BOOTSTRAP_ADMIN, m, {}), `admin may ${m}`);
    t.equal(mayCall(viewer, m, {}), READ_METHODS.has(m), `read-only ${READ_METHODS.has(m) ? 'may' : 'may not'} ${m}`);
  }
  t.ok(isRead('setDns', { preview: true }), 'a change asked as a preview is a read');
  t.notOk(isRead('setPolicy', { preview: true }), 'not for a method that takes no preview (its request would be a change)');
  t.throws(() => checkRole(viewer, 'removeNode', {}), { code: 'MESHP_FORBIDDEN' }, 'refused with a code');
});

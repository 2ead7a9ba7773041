/**
 * Issue 28: a change and its audit row commit together or not at all, against real stores (the
 * state folder's SQLite file; a PostgreSQL cluster of the test's own). Faults are injected with
 * sinon: the audit row's write refused (the change is refused, nothing of it stays), and the
 * transaction failing after both were written, before its commit — a crash between the two — which
 * leaves neither (read back from the store itself: a controller opened again on the file, the rows
 * of the database). A change refused by its own checks writes no row.
 */
import t from 'tap';
import sinon from 'sinon';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller } from '../../plugins/controller/src/controller.js';
import { SqliteControllerStore } from '../../plugins/controller/src/sqlite-store.js';
import { createLogger } from '../../plugins/controller/src/hosting/log.js';
import { openPostgresStore } from '@meshp/store-postgres';
import { auditedChange, type AuditDeps } from '../../plugins/controller/src/hosting/audit.js';
import { SqliteAuditStore } from '../../plugins/controller/src/hosting/audit-store.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';

const log = createLogger('audit-atomic', 'silent');
const rule = (port: string) => [{ from: 'web', to: 'db', ports: [port] }];

/** `policy set` as the admin handler makes it: recorded by auditedChange, committed by `change`. */
const setPolicy = (a: AuditDeps, change: <T>(f: () => T) => Promise<T>, port: string) =>
  auditedChange(a, 'setPolicy', { network: 'default', rules: rule(port) }, 'default', change, () => a.controller.setPolicy('default', rule(port)));

t.test('SQLite: the audit row and the change, one transaction', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-tokens-audit-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'controller.db');
  const store = new SqliteControllerStore(file);
  // Stubbed before the controller takes the store (it binds the method): through to the real write unless told otherwise.
  const write = sinon.stub(store, 'appendAudit').callThrough();
  const controller = new Controller(store);
  controller.createNetwork('default');
  const book = new SqliteAuditStore(file);
  t.teardown(() => {
    book.close();
    controller.close();
  });
  const a: AuditDeps = { book, controller, log, retentionSeconds: 86_400 };
  const now = <T>(f: () => T) => Promise.resolve(f());
  t.ok(controller.auditsInTransaction, 'the SQLite store writes the row in the change');

  await setPolicy(a, now, '5432');
  const v1 = controller.stateVersion('default');
  t.same(
    book.listAudit({ network: 'default', limit: 10 }).map((e) => [e.method, e.stateVersion]),
    [['setPolicy', v1]],
    'a change made: its row, with the version it made',
  );

  // The row refused: the change is refused and nothing of it stays.
  write.throws(new Error('injected: the audit row refused'));
  await t.rejects(setPolicy(a, now, '6432'), /injected: the audit row refused/);
  t.same(controller.policy('default'), rule('5432'), 'the policy in memory is the one before');
  t.equal(controller.stateVersion('default'), v1, 'no version made');

  // A crash after both writes, before the commit: neither.
  write.callsFake(function (this: SqliteControllerStore, ...args: Parameters<SqliteControllerStore['appendAudit']>) {
    write.wrappedMethod.apply(this, args);
    throw new Error('injected: the process went before the commit');
  });
  await t.rejects(setPolicy(a, now, '7432'), /before the commit/);
  t.equal(controller.stateVersion('default'), v1);

  // Refused by its own checks: no row.
  write.callThrough();
  await t.rejects(
    auditedChange(a, 'setTags', { network: 'default', node: 'nobody', tags: [] }, 'default', now, () => controller.setTags('default', 'nobody', [])),
    { code: 'MESHP_NOT_FOUND' },
  );

  // Read back from the file, by a controller opened on it again.
  const again = new Controller(new SqliteControllerStore(file));
  t.teardown(() => again.close());
  t.same(again.policy('default'), rule('5432'), 'the file holds the policy of the one change made');
  t.equal(again.stateVersion('default'), v1);
  t.same(
    book.listAudit({ network: 'default', limit: 10 }).map((e) => e.method),
    ['setPolicy'],
    'and one audit row: none for the refused ones',
  );
  await setPolicy(a, now, '8432');
  t.equal(book.listAudit({ network: 'default', limit: 10 }).length, 2, 'a change after the faults is recorded');
});

const missing = postgresMissing();
t.test('PostgreSQL: the audit row a statement of the change’s commit', { skip: missing ?? false }, async (t) => {
  const cluster = startPostgres(t);
  const url = await cluster.createDb('meshp');
  const pg = await openPostgresStore(url);
  t.teardown(() => pg.close());
  const write = sinon.stub(pg.store, 'appendAudit').callThrough();
  const controller = new Controller(pg.store);
  controller.createNetwork('default');
  const a: AuditDeps = { book: pg.audit, controller, log, retentionSeconds: 86_400 };
  const change = <T>(f: () => T) => controller.change(f);
  const rows = async () => (await cluster.query<{ method: string }>('meshp', 'SELECT method FROM audit_log ORDER BY id')).map((r) => r.method);
  const policyInDb = async () =>
    ((await cluster.query<{ doc: { policy: unknown } }>('meshp', "SELECT doc FROM networks WHERE name = 'default'"))[0]!.doc as { policy: unknown }).policy;

  await setPolicy(a, change, '5432');
  t.same(await rows(), ['setPolicy'], 'a change made: its row');
  t.same(await policyInDb(), rule('5432'));

  write.throws(new Error('injected: the audit row refused'));
  await t.rejects(setPolicy(a, change, '6432'), /injected/);
  t.same(await policyInDb(), rule('5432'), 'the row refused: the change is not in the database');
  t.same(await rows(), ['setPolicy']);
  write.callThrough();

  // The commit cut after both were written into it (the connection lost, the replica killed): neither.
  const run = sinon.stub(pg.db, 'runAsync').callsFake(function (this: typeof pg.db, ...args: Parameters<typeof pg.db.runAsync>) {
    if (args[0].some((s) => s.text.startsWith('INSERT INTO audit_log')))
      return Promise.reject(Object.assign(new Error('injected: the connection went at the commit'), { code: 'MESHP_STORE_UNAVAILABLE' }));
    return run.wrappedMethod.apply(this, args);
  });
  await t.rejects(setPolicy(a, change, '7432'));
  run.restore();
  t.same(await policyInDb(), rule('5432'), 'no change in the database');
  t.same(await rows(), ['setPolicy'], 'and no row');
  t.same(controller.policy('default'), rule('5432'), "the controller's memory put back");

  await setPolicy(a, change, '8432');
  t.same(await rows(), ['setPolicy', 'setPolicy'], 'a change after the faults: its row');
  t.same(await policyInDb(), rule('8432'));
});

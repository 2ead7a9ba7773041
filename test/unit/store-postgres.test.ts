/**
 * @meshp/store-postgres against a real PostgreSQL 15 (a cluster of the test's own: helpers/postgres.ts):
 * versioned migrations (applied once, recorded; a database migrated past what this meshp knows is
 * refused MESHP_STORE_TOO_NEW and left as it was), a controller's state written and read back by a
 * restarted controller the same, a change made in one transaction (a failure midway leaves neither
 * the database nor memory changed), two controllers on one database handing out consecutive
 * versions and learning each other's changes, and the hosting's token single-use across them.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthStore, Controller, MemoryStore, SqliteAdminCredentialStore, SqliteAuditStore, SqliteControllerStore, hashSecret } from '@meshp/controller';
import { meshp } from '../helpers/grpc-procs.js';
import { MIGRATIONS, copyState, migrate, openPostgresStore, schemaVersions, type PostgresStore } from '@meshp/store-postgres';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';

const missing = postgresMissing();
if (missing) {
  t.plan(0, `skipped: PostgreSQL tests need a cluster of their own: ${missing}`);
} else {
  const cluster = startPostgres(t);
  const open = async (url: string): Promise<PostgresStore> => {
    const s = await openPostgresStore(url);
    t.teardown(() => s.close());
    return s;
  };

  t.test('migrations: applied once each, in their own transaction, recorded by number', async (t) => {
    const url = await cluster.createDb('m1');
    t.same(
      await migrate(url),
      MIGRATIONS.map((m) => m.version),
      'a new database gets every migration',
    );
    t.same(await migrate(url), [], 'a second start applies none');
    t.same(
      await schemaVersions(url),
      MIGRATIONS.map((m) => m.version),
      'each recorded once',
    );
    // Two replicas starting at once: the lock lets one migrate, the other finds it done.
    const url2 = await cluster.createDb('m2');
    const both = await Promise.all([migrate(url2), migrate(url2)]);
    t.same(
      // By number: migration 10 sorts before 2 as text.
      [...both[0], ...both[1]].sort((a, b) => a - b),
      MIGRATIONS.map((m) => m.version),
      'two at once: each migration applied by one of them',
    );
  });

  t.test('a database migrated by a newer meshp is refused and left as it was', async (t) => {
    const url = await cluster.createDb('newer');
    await migrate(url);
    await cluster.query('newer', "INSERT INTO meshp_schema (version, what) VALUES (99, 'from a newer meshp')");
    await cluster.query('newer', "INSERT INTO networks (name, version, doc) VALUES ('keep', 7, '{}')");
    await t.rejects(openPostgresStore(url), { code: 'MESHP_STORE_TOO_NEW' }, 'refused with its code');
    t.same(
      (await cluster.query('newer', 'SELECT version FROM meshp_schema ORDER BY version')).map((r) => r.version),
      [...MIGRATIONS.map((m) => m.version), 99],
      'no migration recorded or undone',
    );
    t.same(await cluster.query('newer', 'SELECT name, version FROM networks'), [{ name: 'keep', version: 7 }], 'its data untouched');
  });

  t.test('a controller on PostgreSQL: restarted, it loads the same state', async (t) => {
    const url = await cluster.createDb('roundtrip');
    const a = await open(url);
    const twin = new MemoryStore();
    const drive = (c: Controller) => {
      c.createNetwork('n');
      c.join('n', { id: 'web', nodeKey: 'kw', tags: ['web'] });
      c.join('n', { id: 'db', nodeKey: 'kd', tags: ['db'] });
      c.setPolicy('n', [{ from: 'web', to: 'db', ports: ['5432'] }]);
      c.defineModules('n', [
        { name: 'm1', files: [{ path: '/etc/m1', content: 'x\n' }] },
        { name: 'm2', files: [{ path: '/etc/m2', content: 'y\n' }] },
      ]);
      c.renameNode('n', 'db', 'db1');
      c.deltaFor('n', 'web');
      c.leave('n', 'web');
      c.createToken('n', { tags: ['t'] });
      c.flushSync();
    };
    const c = new Controller(a.store, { now: () => '2026-01-01T00:00:00.000Z' });
    drive(c);
    drive(new Controller(twin, { now: () => '2026-01-01T00:00:00.000Z' }));
    const version = c.stateVersion('n');
    t.equal(version, 7, 'seven changes, seven versions');
    await a.close();

    const b = await open(url);
    const again = new Controller(b.store);
    t.equal(again.stateVersion('n'), version, 'the version survived');
    t.same(again.members('n'), c.members('n'), 'the members');
    t.same(again.policy('n'), c.policy('n'), 'the policy');
    const norm = (s: ReturnType<MemoryStore['load']>) => ({
      networks: s.networks,
      members: [...s.members].sort((x, y) => x.member.id.localeCompare(y.member.id)),
      log: s.log,
      sync: [...s.sync].sort((x, y) => x.id.localeCompare(y.id)).map((x) => ({ ...x, sync: { ...x.sync, expectations: x.sync.expectations.length } })),
      tokens: s.tokens.length,
    });
    const stored = b.store.load();
    t.same(norm(stored), norm(twin.load()), 'what PostgreSQL holds is what the in-memory store holds for the same changes');
  });

  t.test('a change fails midway: neither the database nor the memory has any of it', async (t) => {
    const url = await cluster.createDb('atomic');
    const a = await open(url);
    const c = new Controller(a.store);
    c.createNetwork('n');
    const before = c.stateVersion('n');
    const real = a.store.putToken.bind(a.store);
    a.store.putToken = () => {
      throw Object.assign(new Error('injected'), { code: 'INJECTED' });
    };
    t.throws(
      () => c.createToken('n'),
      { code: 'MESHP_STORE_UNAVAILABLE' },
      "a store error that is no MeshpError: sorted as unavailable (the controller's classifier)",
    );
    a.store.putToken = real;
    t.same(await cluster.query('atomic', 'SELECT token FROM tokens'), [], 'database: no token');
    const mod = (name: string) => ({ name, files: [{ path: `/etc/${name}`, content: `${name}\n` }] });
    const append = a.store.appendLog.bind(a.store);
    let n = 0;
    a.store.appendLog = (net, e) => {
      if (++n === 2) throw Object.assign(new Error('injected'), { code: 'INJECTED' });
      append(net, e);
    };
    t.throws(
      () => c.defineModules('n', [mod('a'), mod('b')]),
      { code: 'MESHP_STORE_UNAVAILABLE' },
      "a store error that is no MeshpError: sorted as unavailable (the controller's classifier)",
    );
    a.store.appendLog = append;
    t.equal(c.stateVersion('n'), before, 'memory: the version where it was');
    t.same((await cluster.query('atomic', "SELECT count(*)::int AS n FROM log WHERE network = 'n'"))[0], { n: 0 }, 'database: no log entry');
    t.same((await cluster.query('atomic', "SELECT version FROM networks WHERE name = 'n'"))[0], { version: before }, 'database: the version where it was');
    c.defineModules('n', [mod('a'), mod('b')]);
    t.equal(c.stateVersion('n'), before + 2, 'the same change without the fault: both');

    // The database refuses a change's writes (at its COMMIT batch): the change is refused by its
    // condition, the memory is put back as committed, and the replica goes on (no restart).
    await cluster.query('atomic', 'ALTER TABLE log ADD CONSTRAINT refuse_all CHECK (false) NOT VALID');
    t.throws(() => c.join('n', { id: 'x', nodeKey: 'kx' }), { code: 'MESHP_STORE_REFUSED' }, 'the write refused, as refused (not corrupt)');
    t.equal(c.stateVersion('n'), before + 2, 'memory: the refused change is visible nowhere (its version)');
    t.notOk(c.member('n', 'x'), 'memory: nor its member');
    t.same((await cluster.query('atomic', "SELECT version FROM networks WHERE name = 'n'"))[0], { version: before + 2 }, 'the database holds none of it');
    await cluster.query('atomic', 'ALTER TABLE log DROP CONSTRAINT refuse_all');
    t.equal(c.join('n', { id: 'y', nodeKey: 'ky' }), before + 3, 'the next change is taken, on the version after the last committed one');
    t.same((await cluster.query('atomic', "SELECT version FROM networks WHERE name = 'n'"))[0], { version: before + 3 }, 'and committed');
  });

  t.test("two controllers on one database: consecutive versions, each learns the other's changes", async (t) => {
    const url = await cluster.createDb('replicas');
    const a = await open(url);
    const b = await open(url);
    const ca = new Controller(a.store);
    ca.createNetwork('n');
    const cb = new Controller(b.store);
    const heard: string[] = [];
    cb.onRemoteChange = (n) => heard.push(n);
    t.equal(ca.join('n', { id: 'x', nodeKey: 'kx', tags: ['a'] }), 1, 'A hands out version 1');
    // B has not caught up yet: its own change first takes the lock and reads A's, so it hands out 2, not 1.
    t.equal(cb.join('n', { id: 'y', nodeKey: 'ky', tags: ['b'] }), 2, 'B hands out version 2');
    t.ok(cb.member('n', 'x'), "B holds A's member");
    t.same(heard, ['n'], "B's controller was told of A's change");
    t.equal(ca.setPolicy('n', [{ from: 'a', to: 'b' }]), 3, 'A, behind B, hands out version 3');
    t.ok(ca.member('n', 'y'), "A holds B's member");
    t.equal(b.store.catchUp(), 1, "B, told, reads A's policy");
    t.same(cb.policy('n'), [{ from: 'a', to: 'b' }], "B's policy is A's");
    t.same(cb.affectedSince('n', 2), new Set(['x', 'y']), "B's log holds A's change: the fan-out is scoped from it");
    // A removal there is a removal here.
    ca.leave('n', 'y');
    cb.refresh(); // what a hello does for a node it does not know yet
    t.notOk(cb.member('n', 'y'), 'a node removed through A is gone from B');
    t.equal(cb.stateVersion('n'), ca.stateVersion('n'), 'both at one version');
    t.same(cb.snapshotOf('n', 'x').hash, ca.snapshotOf('n', 'x').hash, 'and compute the same view');
    // LISTEN/NOTIFY: B's follower hears A's commit and catches up on its own.
    await b.follower.start();
    ca.join('n', { id: 'z', nodeKey: 'kz', tags: ['b'] });
    const { until } = await import('../helpers/budget.js');
    await until('B follows A by notice', () => cb.member('n', 'z'), 20);
    t.ok(b.follower.notices >= 1, 'a notice came');
  });

  t.test('a replica whose log no longer reaches back takes the network whole; a network removed there is removed here', async (t) => {
    const url = await cluster.createDb('whole');
    const a = await open(url);
    const b = await open(url);
    const ca = new Controller(a.store);
    ca.createNetwork('n', { logDepth: 2 });
    ca.createNetwork('gone');
    const cb = new Controller(b.store);
    for (let i = 0; i < 5; i++) ca.join('n', { id: `m${i}`, nodeKey: `k${i}`, tags: ['x'] });
    ca.leave('n', 'm0');
    ca.removeNetwork('gone');
    t.equal(b.store.catchUp(), 2, 'two networks changed there');
    t.same(
      cb
        .members('n')
        .map((m) => m.id)
        .sort(),
      ['m1', 'm2', 'm3', 'm4'],
      'every member, though the log kept only 2 of the 6 changes',
    );
    t.equal(cb.stateVersion('n'), 6, 'at their version');
    t.same(cb.affectedSince('n', 4), ca.affectedSince('n', 4), 'with the same log');
    t.same(cb.networks(), ['n'], 'the network removed there is gone here');
  });

  t.test('meshp controller copy-store: a SQLite state into an empty database, all of it; a second copy refused', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'meshp-copy-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const file = join(dir, 'controller.db');
    const c = new Controller(new SqliteControllerStore(file));
    c.createNetwork('default', { logDepth: 3 });
    for (const id of ['a', 'b', 'c', 'd']) c.join('default', { id, nodeKey: `k${id}`, tags: ['x'] });
    c.setPolicy('default', [{ from: 'x', to: 'x' }]);
    c.deltaFor('default', 'a');
    const members = c.members('default');
    const version = c.stateVersion('default');
    const view = c.snapshotOf('default', 'a').hash;
    c.close();
    const auth = new AuthStore(file);
    auth.putCredential('cred-a', 'default', 'a');
    auth.putToken('unused', { network: 'default', mode: 'converged', tags: [], fingerprint: 'f', expiresAt: '2099-01-01T00:00:00.000Z' });
    auth.revoke('default', 'gone', 'kgone', 'then');
    auth.close();
    // The audit log and the named admin credentials go too (issue 28).
    const audit = new SqliteAuditStore(file);
    const entry = (method: string, v: number) => ({
      at: `2026-12-0${v}T00:00:00.000Z`,
      actor: 'ops',
      network: 'default',
      method,
      node: null,
      summary: method,
      stateVersion: v,
    });
    audit.appendAudit(entry('setPolicy', 2));
    audit.appendAudit(entry('createToken', 1));
    audit.close();
    const admins = new SqliteAdminCredentialStore(file);
    admins.addAdmin(hashSecret('viewer-secret'), { name: 'viewer', role: 'read-only', createdAt: 'then', revokedAt: null });
    admins.addAdmin(hashSecret('ops-secret'), { name: 'ops', role: 'admin', createdAt: 'then', revokedAt: null });
    admins.revokeAdmin('ops', 'later');
    admins.close();

    const url = await cluster.createDb('copy');
    const r = meshp('controller', 'copy-store', '--state', dir, '--to', url, '--json');
    t.equal(r.code, 0, `copied: ${r.err}`);
    t.match(JSON.parse(r.out), { networks: 1, members: 4, log: 3, sync: 4, audit: 2, admins: 2 }, 'it says what it copied');
    const pg = await open(url);
    const again = new Controller(pg.store);
    t.equal(again.stateVersion('default'), version, 'the version');
    t.same(again.members('default'), members, 'the members');
    t.equal(again.snapshotOf('default', 'a').hash, view, 'the same view for a node');
    t.equal(pg.store.syncRecord('default', 'a')?.sent, version, 'the sync records: what a node was sent');
    t.same(pg.auth.nodeOf('cred-a'), { network: 'default', node: 'a' }, 'credentials: an agent keeps its own');
    t.equal(pg.auth.getToken('unused')?.usedAt, null, 'tokens');
    t.same(pg.auth.revokedKey('default', 'kgone'), { node: 'gone', at: 'then' }, 'revoked keys');
    t.same(
      pg.audit.listAudit({ network: 'default', limit: 10 }).map((e) => [e.method, e.stateVersion]),
      [
        ['createToken', 1],
        ['setPolicy', 2],
      ],
      'the audit log, its entries as they were',
    );
    t.match(
      pg.admins.adminBySecret(hashSecret('viewer-secret')),
      { name: 'viewer', role: 'read-only', revokedAt: null },
      'a named credential keeps its secret',
    );
    t.match(pg.admins.adminBySecret(hashSecret('ops-secret')), { name: 'ops', revokedAt: 'later' }, 'a revoked one stays revoked');
    const sqlite = new SqliteControllerStore(file);
    t.throws(() => copyState(pg.db, sqlite.load(), {}), { code: 'MESHP_USAGE' }, 'a second copy into a database that holds a state is refused');
    sqlite.close();
  });

  t.test("the hosting's tokens and credentials are shared: a token is used once across replicas", async (t) => {
    const url = await cluster.createDb('auth');
    const a = await open(url);
    const b = await open(url);
    a.auth.putToken('secret', { network: 'n', mode: 'converged', tags: ['x'], fingerprint: 'f', expiresAt: '2099-01-01T00:00:00.000Z' });
    t.equal(b.auth.getToken('secret')?.network, 'n', 'B reads the token A made');
    t.equal(a.auth.markUsed('secret', 'node1', 'now', 'key1'), true, 'the first use wins');
    t.equal(b.auth.markUsed('secret', 'node2', 'now', 'key2'), false, 'the second, on the other replica, does not');
    a.auth.putCredential('cred', 'n', 'node1');
    t.same(b.auth.nodeOf('cred'), { network: 'n', node: 'node1' }, 'a credential issued by A is known to B');
    t.same((await cluster.query('auth', 'SELECT hash FROM hosting_credentials'))[0], { hash: hashSecret('cred') }, 'kept by its hash only');
    b.auth.revoke('n', 'node1', 'key1', 'now');
    t.equal(a.auth.nodeOf('cred'), null, 'revoked through B, unknown to A');
    t.same(a.auth.revokedKey('n', 'key1'), { node: 'node1', at: 'now' }, 'and its key revoked there');
    t.same(
      a.auth.revokedKeysOf('node1'),
      [{ network: 'n', nodeKey: 'key1', at: 'now' }],
      "the keys revoked under the node's name (a removed agent's hello is told so)",
    );
    t.equal(a.auth.getToken('secret'), null, 'and the token it enrolled with is gone (a replay is unknown)');

    // Under the name it had before a rename, the spent token goes with the node too.
    b.auth.putToken('secret2', { network: 'n', mode: 'converged', tags: [], fingerprint: 'f', expiresAt: '2099-01-01T00:00:00.000Z' });
    t.equal(b.auth.markUsed('secret2', 'old-name', 'now', 'key3'), true);
    b.auth.putToken('other', { network: 'n', mode: 'converged', tags: [], fingerprint: 'f', expiresAt: '2099-01-01T00:00:00.000Z' });
    t.equal(b.auth.markUsed('other', 'someone-else', 'now', 'key4'), true);
    a.auth.rename('n', 'old-name', 'new-name');
    a.auth.revoke('n', 'new-name', 'key3', 'now');
    t.equal(b.auth.getToken('secret2'), null, "a renamed node's token is deleted by its new name");
    t.equal(b.auth.getToken('other')?.usedBy, 'someone-else', "another node's spent token is not touched");
  });
}

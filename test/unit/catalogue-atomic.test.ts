/**
 * `catalogue add` defines a file's modules whole or not at all (issue 13): the store failing on
 * the third module of three (SQLITE_FULL, injected with sinon into a real SQLite store) leaves
 * neither the first two in the store, read back by a restarted controller, nor in the running
 * controller's memory; the same file added without the fault defines all three in one go.
 */
import t from 'tap';
import sinon from 'sinon';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller, SqliteControllerStore } from '@meshp/controller';
import { dirname } from 'node:path';
import { assertPrivate } from '../helpers/modes.js';

const mod = (name: string) => ({ name, files: [{ path: `/etc/${name}.conf`, content: `${name}\n` }] });

t.test('a store failure on the third module leaves none of them defined', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-cat-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'controller.db');
  const store = new SqliteControllerStore(file);
  assertPrivate(t, dirname(file)); // issue 13: the state folder 0700, its database 0600
  let c = new Controller(store);
  c.createNetwork('n');
  c.join('n', { id: 'x', nodeKey: 'kx', tags: [] });
  c.defineModule('n', mod('base'));
  const before = c.stateVersion('n');

  const real = store.appendLog.bind(store);
  let calls = 0;
  const fault = sinon.stub(store, 'appendLog').callsFake((network, entry) => {
    calls += 1;
    if (calls === 3) throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
    real(network, entry);
  });
  // Sorted by condition (issue 24): SQLite's full disk is MESHP_STORE_FULL to the caller.
  t.throws(() => c.defineModules('n', [mod('a'), mod('b'), mod('c')]), { code: 'MESHP_STORE_FULL' });
  fault.restore();
  t.equal(calls, 3, 'the first two were written before the third failed');
  t.equal(c.stateVersion('n'), before, 'the version is where it was');
  for (const m of ['a', 'b', 'c']) t.throws(() => c.assignModule('n', 'x', m), { code: 'MESHP_NOT_FOUND' }, `${m} not defined in memory`);
  t.equal(c.declarationOf('n', 'x').modules.length, 0);
  c.close();

  c = new Controller(new SqliteControllerStore(file));
  t.teardown(() => c.close());
  t.equal(c.stateVersion('n'), before, 'restarted: the store holds the version from before');
  for (const m of ['a', 'b', 'c']) t.throws(() => c.assignModule('n', 'x', m), { code: 'MESHP_NOT_FOUND' }, `${m} not in the store`);
  c.assignModule('n', 'x', 'base');

  // Without the fault the same file defines all three, each one change.
  const v = c.stateVersion('n');
  t.equal(c.defineModules('n', [mod('a'), mod('b'), mod('c')]), v + 3);
  for (const m of ['a', 'b', 'c']) c.assignModule('n', 'x', m);
  t.same(
    c
      .declarationOf('n', 'x')
      .modules.map((m) => m.name)
      .sort(),
    ['a', 'b', 'base', 'c'],
  );
});

t.test('a module over a limit refuses the whole file before any is stored', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-cat-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const c = new Controller(new SqliteControllerStore(join(dir, 'controller.db')));
  t.teardown(() => c.close());
  c.createNetwork('n');
  const before = c.stateVersion('n');
  const big = { name: 'big', files: [{ path: '/etc/big.conf', content: 'x'.repeat(1024 * 1024 + 1) }] };
  t.throws(() => c.defineModules('n', [mod('a'), big]), { code: /^MESHP_/, message: /over the limit/ });
  t.equal(c.stateVersion('n'), before, 'nothing stored: the first module is not defined either');
});

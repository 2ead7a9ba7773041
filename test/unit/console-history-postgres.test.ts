/**
 * Issue 30: the console's convergence history in PostgreSQL (migration 9, a cluster of the test's own:
 * helpers/postgres.ts): the samples one controller's console writes are read back by the next one
 * opened on the database (a restart, or another replica), and the window trims them there.
 */
import t from 'tap';
import { openPostgresStore } from '@meshp/store-postgres';
import { ConvergenceHistory, type GapOf } from '../../plugins/controller/src/console/history.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';

const missing = postgresMissing();
if (missing) {
  t.plan(0, `skipped: PostgreSQL tests need a cluster of their own: ${missing}`);
} else {
  const cluster = startPostgres(t);

  t.test('samples written, a new store opened (a restart): the window read back, older rows trimmed', async (t) => {
    const url = await cluster.createDb('hist');
    const gaps: GapOf[] = [
      { network: 'default', node: 'a', gap: 2 },
      { network: 'other', node: 'x', gap: 5 },
    ];
    const errors: unknown[] = [];
    const first = await openPostgresStore(url);
    t.ok(first.migrated.includes(9), 'migration 9 applied');
    const h1 = new ConvergenceHistory({ gaps: () => gaps, sampleMs: 60_000, windowMs: 30_000, book: first.history, onError: (e) => errors.push(e) });
    const t0 = Date.now();
    h1.sample(t0 + 1_000);
    const before = h1.view('default');
    // The writes are asked off the controller's thread: the next read on the connection comes after them.
    await new Promise((r) => setTimeout(r, 200));
    h1.close();
    await first.close();

    const second = await openPostgresStore(url);
    t.teardown(() => second.close());
    const h2 = new ConvergenceHistory({ gaps: () => [], sampleMs: 60_000, windowMs: 30_000, book: second.history });
    t.same(h2.view('default').at, before.at, "the first store's samples, read back");
    t.same(
      h2.view('default').nodes.map((n) => [n.name, n.gaps]),
      [['a', [2, 2]]],
    );
    t.same(h2.view('other').p99, [5, 5], 'per network');
    h2.close();
    await second.history.appendHistory([{ network: 'default', at: t0 + 60_000, gaps: { a: 0 } }], t0 + 30_000);
    t.same(
      second.history.loadHistory(0).map((r) => [r.network, r.at]),
      [['default', t0 + 60_000]],
      'a write trims what is older than the window',
    );
    t.same(errors, [], 'no write failed');
  });
}

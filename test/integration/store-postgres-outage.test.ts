/**
 * The database stopped under two replicas and four agents (issue 24): a PostgreSQL 15 cluster of the
 * test's own, stopped as by a crash (`pg_ctl stop -m immediate`) for 30 s while two `meshp
 * controller serve` replicas serve four agents over real gRPC. No replica exits; admin changes
 * through either are refused MESHP_STORE_UNAVAILABLE within the batch timeout and a second; node
 * lists answer from memory; /metrics says the store is down. The database started again, both
 * replicas serve again without a restart: a change through either reaches all four agents on the
 * streams they had (no reconnect) and no snapshot is sent.
 */
import t from 'tap';
import { DEFAULT_CALL_TIMEOUT_MS } from '@meshp/store-postgres';
import { nodes, waitUntil } from '../helpers/grpc-procs.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { changeWhenUp, logged, startReplicas, timed } from '../helpers/pg-replicas.js';
import { fileBudget, loadFactor } from '../helpers/budget.js';
import { scrape } from '../helpers/prom.js';

const OUTAGE_MS = 30_000;
/** A change during the outage is refused within this (idle-machine ms): one batch timeout, and a second for the call itself. */
const REFUSED_WITHIN_MS = DEFAULT_CALL_TIMEOUT_MS + 1_000;

const missing = postgresMissing();
if (missing) {
  t.plan(0, `skipped: the outage test needs a PostgreSQL cluster of its own: ${missing}`);
} else {
  fileBudget(300);
  t.test('PostgreSQL stopped for 30 s under two replicas and four agents: refused, read, back by itself', async (t) => {
    const cluster = startPostgres(t);
    const url = await cluster.createDb('meshp');
    const r = await startReplicas(t, url, 'pg-outage');
    const { a, b, agents } = r;
    const alive = () => [a, b].every((x) => x.proc.child.exitCode === null && x.proc.child.signalCode === null);
    const streams = new Map(agents.map((x) => [x, x.streams]));
    const marks = { a: a.proc.lines.length, b: b.proc.lines.length };

    cluster.stop();
    const downAt = Date.now();
    for (const ctl of [a, b]) {
      const first = await timed(() => r.change(ctl, ['1']));
      t.equal(first.code, 'MESHP_STORE_UNAVAILABLE', `a change through ${ctl === a ? 'A' : 'B'} while the database is down: MESHP_STORE_UNAVAILABLE`);
      t.ok(first.ms / loadFactor() < REFUSED_WITHIN_MS, `refused in ${first.ms} ms (within ${REFUSED_WITHIN_MS} ms of idle-machine time)`);
      const rows = await nodes(ctl);
      t.equal(rows.length, agents.length, 'its node list answers, every node in it');
      const m = await scrape(ctl.metrics);
      t.equal(m.value('meshp_controller_store_up'), 0, '/metrics: the store is down');
    }
    // The rest of the outage: the agents ack and the sync flushes fail meanwhile; nothing ends.
    while (Date.now() - downAt < OUTAGE_MS && alive()) await new Promise((res) => setTimeout(res, 1_000));
    t.ok(alive(), 'after 30 s down, both replicas still run');
    for (const ctl of [a, b]) {
      const late = await timed(() => r.change(ctl, ['2']));
      t.equal(late.code, 'MESHP_STORE_UNAVAILABLE', 'a change at the end of the outage: still refused');
      t.ok(late.ms / loadFactor() < REFUSED_WITHIN_MS, `in ${late.ms} ms`);
    }

    cluster.start();
    // Both serve again by themselves: a change taken through B, then one through A.
    await changeWhenUp(r, b, ['443'], 60);
    const v1 = await r.version(b);
    await waitUntil(`every agent at ${v1}`, () => r.current(v1), 60_000);
    t.pass(`a change through B after the restart reached all four agents (version ${v1})`);
    await changeWhenUp(r, a, ['8443'], 60);
    const v2 = await r.version(a);
    t.ok(v2 > v1, 'A hands out a later version');
    await waitUntil(`every agent at ${v2}`, () => r.current(v2), 60_000);
    t.pass(`a change through A reached all four agents (version ${v2})`);
    await waitUntil(
      'both replicas say the store is up',
      async () => (await scrape(a.metrics)).value('meshp_controller_store_up') === 1 && (await scrape(b.metrics)).value('meshp_controller_store_up') === 1,
      30_000,
    );
    t.pass('/metrics: the store is up again on both');

    t.ok(alive(), 'neither replica exited or was restarted');
    t.same(
      agents.map((x) => x.streams - streams.get(x)!),
      agents.map(() => 0),
      'no agent reconnected: every stream stayed open through the outage',
    );
    t.same([...logged(a, marks.a, 'snapshot sent'), ...logged(b, marks.b, 'snapshot sent')], [], 'no agent needed a snapshot');
    for (const [name, ctl] of [
      ['A', a],
      ['B', b],
    ] as const) {
      const said = (re: RegExp) => ctl.proc.stderr.split('\n').filter((l) => re.test(l)).length;
      t.equal(said(/: the database is unreachable \(/), 1, `${name} said the outage once (stderr)`);
      t.equal(said(/the database answers again after \d+ ms/), 1, `${name} said once that it ended`);
      t.ok(said(/the database follower:/) <= 1, `${name}'s follower said its failure at most once, not at each poll`);
      t.ok(
        ctl.proc.lines.some((l) => l.msg?.startsWith('store down')),
        `${name} logged the store down`,
      );
    }
  });
}

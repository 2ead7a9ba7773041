/**
 * @meshp/store-postgres when its database goes away (issue 24), against a real PostgreSQL 15 of the
 * test's own: a failed batch is coded by its condition (sql-state.ts), never "corrupt" for a
 * database that is only down; once found down, every store call is refused at once (no wait on the
 * event loop) while a probe runs in the background; the database back, the store is up by itself and
 * a change is taken on the version after the last committed one. A database that accepts the
 * connection and then says nothing (a stall: an in-process TCP relay to the cluster's socket that
 * holds the bytes) costs one batch timeout, its thread is replaced, and the event loop is not held
 * by the probes.
 */
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { Controller } from '@meshp/controller';
import { SyncPg, codeOf, openPostgresStore, migrate } from '@meshp/store-postgres';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { loadFactor, until } from '../helpers/budget.js';

t.test('a failed batch is coded by its condition', async (t) => {
  const table: [string, string][] = [
    ['', 'MESHP_STORE_UNAVAILABLE'],
    ['ECONNREFUSED', 'MESHP_STORE_UNAVAILABLE'],
    ['ENOENT', 'MESHP_STORE_UNAVAILABLE'],
    ['ETIMEDOUT', 'MESHP_STORE_UNAVAILABLE'],
    ['08006', 'MESHP_STORE_UNAVAILABLE'],
    ['57P01', 'MESHP_STORE_UNAVAILABLE'],
    ['57P03', 'MESHP_STORE_UNAVAILABLE'],
    ['53300', 'MESHP_STORE_UNAVAILABLE'],
    ['57014', 'MESHP_STORE_UNAVAILABLE'],
    ['55P03', 'MESHP_STORE_UNAVAILABLE'],
    ['40001', 'MESHP_STORE_UNAVAILABLE'],
    ['40P01', 'MESHP_STORE_UNAVAILABLE'],
    ['53100', 'MESHP_STORE_FULL'],
    ['XX001', 'MESHP_STATE_CORRUPT'],
    ['XX002', 'MESHP_STATE_CORRUPT'],
    ['23505', 'MESHP_STORE_REFUSED'],
    ['23514', 'MESHP_STORE_REFUSED'],
    ['42P01', 'MESHP_STORE_REFUSED'],
    ['XX000', 'MESHP_STORE_REFUSED'],
  ];
  for (const [state, code] of table) t.equal(codeOf(state), code, `${state || '(no code)'} → ${code}`);
});

const RELAY = `
const { workerData } = require('node:worker_threads');
const net = require('node:net');
const { ctl, socket } = workerData;
const server = net.createServer((c) => {
  const up = net.connect(socket);
  const pass = (from, to) => from.on('data', (d) => { if (Atomics.load(ctl, 0) === 0) to.write(d); });
  pass(c, up);
  pass(up, c);
  let done = false;
  const end = () => { if (!done) { done = true; Atomics.add(ctl, 1, 1); } c.destroy(); up.destroy(); };
  c.on('close', end).on('error', end);
  up.on('close', end).on('error', end);
});
server.listen(0, '127.0.0.1', () => Atomics.store(ctl, 2, server.address().port));
`;

/** The longest gap between ticks of a 50 ms interval while `ms` pass: how long the event loop stood still. */
async function longestStall(ms: number): Promise<number> {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 50);
  await new Promise((r) => setTimeout(r, ms));
  clearInterval(timer);
  return worst;
}

const missing = postgresMissing();
if (missing) {
  t.test('the outage tests', (t) => {
    t.plan(0, `skipped: they need a PostgreSQL cluster of their own: ${missing}`);
    t.end();
  });
} else {
  t.test('PostgreSQL stopped: refused at once while down, up again by itself, nothing lost or invented', async (t) => {
    const cluster = startPostgres(t);
    const url = await cluster.createDb('outage');
    const s = await openPostgresStore(url);
    t.teardown(() => s.close());
    const ups: number[] = [];
    s.db.onUp = (ms) => ups.push(ms);
    const c = new Controller(s.store);
    c.createNetwork('n');
    const v = c.join('n', { id: 'a', nodeKey: 'ka' });

    cluster.stop();
    t.throws(() => c.join('n', { id: 'b', nodeKey: 'kb' }), { code: 'MESHP_STORE_UNAVAILABLE' }, 'a change while down: unavailable, not corrupt');
    t.equal(s.db.health().up, false, 'the store counts its database as down');
    const t0 = performance.now();
    t.throws(() => c.join('n', { id: 'b', nodeKey: 'kb' }), { code: 'MESHP_STORE_UNAVAILABLE' }, 'the next one too');
    t.ok(performance.now() - t0 < 1000 * loadFactor(), 'refused at once (no wait for the database)');
    t.equal(c.stateVersion('n'), v, 'memory: the refused changes are visible nowhere');
    t.notOk(c.member('n', 'b'), 'memory: no member b');
    const stall = await longestStall(1500);
    t.ok(stall < 1000 * loadFactor(), `the probes do not hold the event loop (longest stall ${Math.round(stall)} ms)`);

    cluster.start();
    await until('the store up again', () => s.db.health().up, 30);
    t.equal(ups.length, 1, 'told once that it is up again');
    t.equal(c.join('n', { id: 'b', nodeKey: 'kb' }), v + 1, 'a change is taken, on the version after the last committed one');
    t.same((await cluster.query('outage', "SELECT version FROM networks WHERE name = 'n'"))[0], { version: v + 1 }, 'and committed');
  });

  t.test('a database that stops answering: one batch timeout, its thread replaced, then refused at once; back when it answers', async (t) => {
    const cluster = startPostgres(t);
    const url = await cluster.createDb('stall');
    await migrate(url);
    // A relay on loopback to the cluster's socket, on a thread of its own (this one blocks in each
    // batch's wait); while `hold` (ctl[0] = 1), bytes are taken and never passed on. ctl[1] counts
    // the client connections closed, ctl[2] is the port.
    const ctl = new Int32Array(new SharedArrayBuffer(12));
    const relay = new Worker(RELAY, { eval: true, workerData: { ctl, socket: join(cluster.dir, '.s.PGSQL.5432') } });
    t.teardown(() => relay.terminate());
    await until('the relay listening', () => Atomics.load(ctl, 2) !== 0, 20);
    const port = Atomics.load(ctl, 2);
    const closed = () => Atomics.load(ctl, 1);
    const timeoutMs = 800;
    const db = new SyncPg(`postgres://postgres@127.0.0.1:${port}/stall`, timeoutMs);
    t.teardown(() => db.close());
    t.same(db.rows('SELECT 1 AS x'), [{ x: 1 }], 'answers through the relay');

    Atomics.store(ctl, 0, 1);
    const t0 = performance.now();
    t.throws(() => db.rows('SELECT 2 AS x'), { code: 'MESHP_STORE_UNAVAILABLE' }, 'no answer: unavailable');
    const waited = performance.now() - t0;
    t.ok(waited >= timeoutMs - 50, `after the batch timeout (${Math.round(waited)} ms)`);
    await until("the stalled thread's connection closed (the thread replaced)", () => closed() >= 1, 20);
    const t1 = performance.now();
    t.throws(() => db.rows('SELECT 3 AS x'), { code: 'MESHP_STORE_UNAVAILABLE' }, 'while down: refused');
    t.ok(performance.now() - t1 < 500 * loadFactor(), 'at once');
    const stall = await longestStall(2500);
    t.ok(stall < 500 * loadFactor(), `probes that get no answer do not hold the event loop (longest stall ${Math.round(stall)} ms)`);

    Atomics.store(ctl, 0, 0);
    await until('the store up again', () => db.health().up, 30);
    // The late answer to SELECT 2 went with the thread that asked: this one is the answer to this batch.
    t.same(db.rows('SELECT 4 AS x'), [{ x: 4 }], 'the next batch gets its own answer');
    t.equal(db.health().outages, 1, 'one outage counted');
  });
}

/**
 * @meshp/store-postgres when its database goes away (issue 24), against a real PostgreSQL 15 of the
 * test's own: a failed batch is coded by its condition (sql-state.ts), never "corrupt" for a
 * database that is only down; once found down, every store call is refused at once (no wait on the
 * event loop) while a probe runs in the background; the database back, the store is up by itself and
 * a change is taken on the version after the last committed one. A database that accepts the
 * connection and then says nothing (a stall: an in-process TCP relay to the cluster's socket that
 * holds the bytes) costs one batch timeout, its thread is replaced, and the event loop is not held
 * by the probes. A commit whose answer is lost (the relay holds everything once COMMIT went through)
 * is refused, memory stays as committed before, and once the database answers the store catches up
 * by itself and finds it, as another replica's change.
 */
import t from 'tap';
import { Worker } from 'node:worker_threads';
import { join } from 'node:path';
import { Controller } from '@meshp/controller';
import { SyncPg, codeOf, openPostgresStore, migrate } from '@meshp/store-postgres';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { loadFactor, until } from '../helpers/budget.js';
import type { Subtest } from '../helpers/tap-types.js';

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

// A relay on loopback to the cluster's socket, on a thread of its own (the test's thread blocks in
// each batch's wait). ctl[0]: 0 passes bytes, 1 holds them (taken, never passed on), 2 passes until
// a chunk from the client carrying COMMIT went through, then holds (a commit whose answer is lost).
// ctl[1] counts the client connections closed, ctl[2] is the port.
const RELAY = `
const { workerData } = require('node:worker_threads');
const net = require('node:net');
const { ctl, socket } = workerData;
const server = net.createServer((c) => {
  const up = net.connect(socket);
  c.on('data', (d) => {
    if (Atomics.load(ctl, 0) === 1) return;
    up.write(d);
    if (Atomics.load(ctl, 0) === 2 && d.includes('COMMIT')) Atomics.store(ctl, 0, 1);
  });
  up.on('data', (d) => { if (Atomics.load(ctl, 0) !== 1) c.write(d); });
  let done = false;
  const end = () => { if (!done) { done = true; Atomics.add(ctl, 1, 1); } c.destroy(); up.destroy(); };
  c.on('close', end).on('error', end);
  up.on('close', end).on('error', end);
});
server.listen(0, '127.0.0.1', () => Atomics.store(ctl, 2, server.address().port));
`;

async function startRelay(t: Subtest, socket: string): Promise<{ ctl: Int32Array; port: number }> {
  const ctl = new Int32Array(new SharedArrayBuffer(12));
  const relay = new Worker(RELAY, { eval: true, workerData: { ctl, socket } });
  t.teardown(() => relay.terminate());
  await until('the relay listening', () => Atomics.load(ctl, 2) !== 0, 20);
  return { ctl, port: Atomics.load(ctl, 2) };
}

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
    const { ctl, port } = await startRelay(t, join(cluster.dir, '.s.PGSQL.5432'));
    const closed = () => Atomics.load(ctl, 1);
    const timeoutMs = 800;
    const db = new SyncPg(`postgres://postgres@127.0.0.1:${port}/stall`, timeoutMs);
    t.teardown(() => db.close());
    // The first batch connects (slow on a loaded machine): given more than the batch timeout under test.
    t.same(db.run([{ text: 'SELECT 1 AS x' }], 30_000)[0]!.rows, [{ x: 1 }], 'answers through the relay');

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

  t.test("a commit whose answer was lost: refused, memory as before, then caught up as another replica's change", async (t) => {
    const cluster = startPostgres(t);
    await cluster.createDb('lost');
    const { ctl, port } = await startRelay(t, join(cluster.dir, '.s.PGSQL.5432'));
    const s = await openPostgresStore(`postgres://postgres@127.0.0.1:${port}/lost`, { callTimeoutMs: 1500 });
    t.teardown(() => s.close());
    const c = new Controller(s.store);
    c.createNetwork('n');
    const v = c.join('n', { id: 'a', nodeKey: 'ka' });

    Atomics.store(ctl, 0, 2);
    t.throws(() => c.join('n', { id: 'x', nodeKey: 'kx' }), { code: 'MESHP_STORE_UNAVAILABLE' }, 'the answer to COMMIT lost: unavailable');
    t.equal(c.stateVersion('n'), v, 'memory: as committed before (the outcome is not known)');
    t.notOk(c.member('n', 'x'), 'memory: no member x');
    const there = await cluster.query('lost', "SELECT version FROM networks WHERE name = 'n'");
    t.same(there, [{ version: v + 1 }], 'the database did commit it');

    Atomics.store(ctl, 0, 0);
    await until('the store up again', () => s.db.health().up, 30);
    // Nobody calls catchUp here: the store, up again, pokes its follower, which catches up.
    await until('memory caught up by itself', () => c.stateVersion('n') === v + 1, 30);
    t.equal(c.stateVersion('n'), v + 1, 'memory: the version the database holds');
    t.ok(c.member('n', 'x'), 'memory: member x, as committed');
    t.equal(c.join('n', { id: 'y', nodeKey: 'ky' }), v + 2, 'the next change follows it');
  });
}

/**
 * The database behind a partition (issue 24): a PostgreSQL 15 cluster of the test's own listens on
 * TCP inside a network namespace the test makes; the two replicas reach it through a relay in that
 * namespace (helpers/pg-bridge.mjs: a unix socket in the test's folder, carried over TCP on the
 * namespace's loopback), so nothing in the machine's own namespace (routes, firewall) is changed.
 * nft inside the namespace drops every packet to and from PostgreSQL's port for 20 s: no RST, no
 * FIN, the database just stops answering. Meanwhile the four agents' streams stay open (no agent
 * reconnects: the replicas' event loops are never held past the keepalive's 10 s), every admin call
 * answers within its 15 s deadline (refused MESHP_STORE_UNAVAILABLE, or served), node lists
 * answer; once the drop is lifted both replicas serve again without a restart, and a change through
 * either reaches all four agents with no snapshot.
 */
import t from 'tap';
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Proc, nodes, waitUntil } from '../helpers/grpc-procs.js';
import { netns, runPrefix } from '../helpers/netns.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { changeWhenUp, logged, startReplicas, timed } from '../helpers/pg-replicas.js';
import { fileBudget, loadFactor } from '../helpers/budget.js';

const BRIDGE = join(dirname(fileURLToPath(import.meta.url)), '../helpers/pg-bridge.mjs');
const PARTITION_MS = 20_000;
/** The Admin client's deadline (transport-grpc admin-client.ts): every call answers within it. */
const ADMIN_DEADLINE_MS = 15_000;

const DROP = `table inet meshp_partition {
  chain input { type filter hook input priority 0; policy accept; tcp dport 5432 drop; tcp sport 5432 drop; }
  chain output { type filter hook output priority 0; policy accept; tcp dport 5432 drop; tcp sport 5432 drop; }
}
`;

const missing = postgresMissing() ?? (process.getuid?.() === 0 ? null : 'namespaces and nft need root');
if (missing) {
  t.plan(0, `skipped: the partition test needs a PostgreSQL cluster and a namespace of its own: ${missing}`);
} else {
  fileBudget(300);
  t.test('PostgreSQL behind a 20 s partition: streams stay open, calls answer in time, back by itself', async (t) => {
    const ns = await netns(t, `${runPrefix('pgp')}db`);
    const cluster = startPostgres(t, { ns });
    const url = await cluster.createDb('meshp');
    const via = join(cluster.dir, 'bridge');
    mkdirSync(via, { mode: 0o700 });
    const bridge = new Proc(t, [join(via, '.s.PGSQL.5432'), '5432'], ns, BRIDGE);
    await bridge.waitFor((l) => l.msg === 'listening', 30_000);
    const bridged = url.replace(encodeURIComponent(cluster.dir), encodeURIComponent(via));
    const r = await startReplicas(t, bridged, 'pg-partition');
    const { a, b, agents } = r;
    const alive = () => [a, b].every((x) => x.proc.child.exitCode === null && x.proc.child.signalCode === null);
    const streams = new Map(agents.map((x) => [x, x.streams]));
    const marks = { a: a.proc.lines.length, b: b.proc.lines.length };

    await ns.exec('nft', ['-f', '-'], DROP);
    let lifted = false;
    t.teardown(() => (lifted ? undefined : ns.exec('nft', ['delete', 'table', 'inet', 'meshp_partition']).catch(() => undefined)));
    const cutAt = Date.now();
    const calls: { what: string; code: string | null; ms: number }[] = [];
    let round = 0;
    while (Date.now() - cutAt < PARTITION_MS && alive()) {
      round++;
      for (const [name, ctl] of [
        ['A', a],
        ['B', b],
      ] as const) {
        calls.push({ what: `change through ${name}`, ...(await timed(() => r.change(ctl, [String(round)]))) });
        calls.push({ what: `node list on ${name}`, ...(await timed(() => nodes(ctl))) });
      }
      await new Promise((res) => setTimeout(res, 1_000));
    }
    await ns.exec('nft', ['delete', 'table', 'inet', 'meshp_partition']);
    lifted = true;
    t.ok(alive(), `after ${PARTITION_MS / 1000} s of partition, both replicas still run`);
    t.ok(calls.length >= 4, `${calls.length} admin calls made during the partition`);
    const late = calls.filter((c) => c.ms / loadFactor() >= ADMIN_DEADLINE_MS);
    t.same(late, [], `every admin call answered within its ${ADMIN_DEADLINE_MS / 1000} s deadline (the longest ${Math.max(...calls.map((c) => c.ms))} ms)`);
    const odd = calls.filter((c) => (c.what.startsWith('node list') ? c.code !== null : c.code !== null && c.code !== 'MESHP_STORE_UNAVAILABLE'));
    t.same(odd, [], 'node lists answered; changes were served or refused MESHP_STORE_UNAVAILABLE');
    t.ok(
      calls.some((c) => c.code === 'MESHP_STORE_UNAVAILABLE'),
      'changes were refused while the database could not be reached',
    );

    await changeWhenUp(r, b, ['443'], 90);
    const v1 = await r.version(b);
    await waitUntil(`every agent at ${v1}`, () => r.current(v1), 60_000);
    t.pass(`after the partition, a change through B reached all four agents (version ${v1})`);
    await changeWhenUp(r, a, ['8443'], 90);
    const v2 = await r.version(a);
    await waitUntil(`every agent at ${v2}`, () => r.current(v2), 60_000);
    t.pass(`and one through A (version ${v2})`);
    t.ok(alive(), 'neither replica exited or was restarted');
    t.same(
      agents.map((x) => x.streams - streams.get(x)!),
      agents.map(() => 0),
      'no agent reconnected: the keepalives kept every stream open through the partition',
    );
    t.same([...logged(a, marks.a, 'snapshot sent'), ...logged(b, marks.b, 'snapshot sent')], [], 'no agent needed a snapshot');
  });
}

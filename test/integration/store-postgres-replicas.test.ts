/**
 * Two `meshp controller serve` replicas on one PostgreSQL database (a cluster of the test's own,
 * helpers/postgres.ts), over real gRPC, with agents spread over both (SimAgents given both
 * addresses, in either order). A change made through one replica — a policy, a node's enrolment —
 * reaches the agents connected to the other (its follower hears the NOTIFY, catches up and fans
 * out) and every gap is back to 0. Then one replica is killed by its pid: its agents move to the
 * other and resume from the version they applied (the log and their sync records are shared), with
 * no snapshot, and are back at gap 0; a change through the survivor reaches all of them, and the
 * killed replica started again loads the state the survivor wrote.
 */
import t from 'tap';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { nodes, replicaState, startController, tokenFor, waitUntil, workdir, type ControllerProc } from '../helpers/grpc-procs.js';
import { SimAgent } from '../helpers/sim-agent.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';

const missing = postgresMissing();
const PER_REPLICA = 3;

if (missing) {
  t.plan(0, `skipped: the replica test needs a PostgreSQL cluster of its own: ${missing}`);
} else {
  t.test('two replicas on one PostgreSQL: changes reach agents on the other; a replica killed, its agents resume on the other', async (t) => {
    const cluster = startPostgres(t);
    const url = await cluster.createDb('meshp');
    const dir = workdir(t, 'pg-replicas');
    const flags = ['--store', url, '--sync-flush-ms', '200'];
    // At debug: each agent's 'delta sent' line, which says whom (at info, one 'fan-out sent' line a fan-out).
    const a = await startController(t, join(dir, 'a'), flags, '127.0.0.1:0', 'debug');
    replicaState(join(dir, 'a'), join(dir, 'b'));
    const b = await startController(t, join(dir, 'b'), flags, '127.0.0.1:0', 'debug');
    t.match(
      b.proc.lines.find((l) => l.msg === 'controller serving'),
      { store: /^postgres:\/\// },
      'B serves from the database',
    );
    const { fingerprint } = readAdminCredential(join(dir, 'a', ADMIN_CREDENTIAL_FILE));

    // Agents on A list A first; agents on B, B first. Every token is made through A: B enrols with it (the tokens are shared).
    const onA = Array.from({ length: PER_REPLICA }, (_, i) => new SimAgent(`a${i}`, [a.address, b.address], fingerprint));
    const onB = Array.from({ length: PER_REPLICA }, (_, i) => new SimAgent(`b${i}`, [b.address, a.address], fingerprint));
    const all = [...onA, ...onB];
    t.teardown(() => all.forEach((x) => x.close()));
    for (const x of all) await x.enrol(await tokenFor(a, ['all']));
    for (const x of all) x.open();

    const version = async (ctl: ControllerProc) => (await nodes(ctl))[0]!.stateVersion;
    /** Every agent applied `v`, and the replica each is connected to says gap 0 for it. */
    const current = async (v: number, groups: [ControllerProc, SimAgent[]][]) => {
      for (const [ctl, agents] of groups) {
        const rows = await nodes(ctl);
        for (const x of agents) {
          const row = rows.find((r) => r.name === x.name);
          if (x.applier.appliedVersion !== v || !row || row.gap !== 0 || row.appliedVersion !== v) return false;
        }
      }
      return true;
    };
    const spread: [ControllerProc, SimAgent[]][] = [
      [a, onA],
      [b, onB],
    ];

    // A policy set through A reaches the agents connected to B.
    const bBefore = b.proc.lines.length;
    await (await a.admin!()).call('setPolicy', { network: 'default', rules: [{ fromTag: 'all', toTag: 'all', ports: [] }] });
    const v1 = await version(a);
    t.equal(await version(b), v1, `both replicas at version ${v1}`);
    await waitUntil(`every agent at ${v1}, gap 0 on its replica`, () => current(v1, spread), 60_000);
    const sentByB = new Set(
      b.proc.lines
        .slice(bBefore)
        .filter((l) => l.msg === 'delta sent' || l.msg === 'snapshot sent')
        .map((l) => l.node),
    );
    t.ok(
      onB.every((x) => sentByB.has(x.name)),
      "B sent A's policy change to its own agents",
    );
    t.ok(
      onB.every((x) => x.applier.view.size === all.length - 1),
      `each agent on B sees the ${all.length - 1} others, those enrolled through A included`,
    );

    // A node enrolled through A: the agents on B learn of it from B.
    const late = new SimAgent('late', [a.address, b.address], fingerprint);
    t.teardown(() => late.close());
    await late.enrol(await tokenFor(a, ['all']));
    late.open();
    onA.push(late);
    all.push(late);
    const v2 = await version(a);
    t.ok(v2 > v1, 'the join is a new version');
    await waitUntil(`every agent at ${v2}, gap 0 on its replica`, () => current(v2, spread), 60_000);
    t.ok(
      onB.every((x) => x.applier.view.peer('late')),
      'the agents on B see the node that joined through A',
    );
    t.ok(
      onB.every((x) => x.applier.view.size === all.length - 1),
      `each sees the ${all.length - 1} others`,
    );
    // Each replica shows every node's gap, those of the nodes on the other one too (as that one wrote them).
    await waitUntil(
      'both replicas show gap 0 for every node',
      () =>
        current(v2, [
          [a, all],
          [b, all],
        ]),
      60_000,
    );
    t.pass(`each replica shows gap 0 and version ${v2} for every node, the other one's included`);

    // A killed by its pid: its agents go to B and resume there, no snapshot.
    const streamsBefore = new Map(onA.map((x) => [x.name, x.streams]));
    const bAtKill = b.proc.lines.length;
    a.proc.kill('SIGKILL');
    await a.proc.exited;
    await waitUntil(
      "A's agents on B",
      () =>
        onA.every((x) => x.address === b.address && x.streams > streamsBefore.get(x.name)!) &&
        onA.every((x) => b.proc.lines.slice(bAtKill).some((l) => l.msg === 'sync stream opened' && l.node === x.name)),
      60_000,
    );
    await waitUntil(`every agent at ${v2} with gap 0 on B`, () => current(v2, [[b, all]]), 60_000);
    const opened = b.proc.lines.slice(bAtKill).filter((l) => l.msg === 'sync stream opened');
    t.ok(
      onA.every((x) => opened.some((l) => l.node === x.name && l.resume === true)),
      "every one of A's agents resumed on B from the version it applied",
    );
    t.same(
      b.proc.lines
        .slice(bAtKill)
        .filter((l) => l.msg === 'snapshot sent')
        .map((l) => l.node),
      [],
      'no snapshot was sent',
    );
    t.equal(await version(b), v2, 'no version was lost');

    // The survivor carries on: a change through B reaches every agent.
    await (await b.admin!()).call('setPolicy', { network: 'default', rules: [{ fromTag: 'all', toTag: 'all', ports: ['443'] }] });
    const v3 = await version(b);
    t.equal(v3, v2 + 1, 'B hands out the next version');
    await waitUntil(`every agent at ${v3}`, () => current(v3, [[b, all]]), 60_000);
    t.pass(`all ${all.length} agents at version ${v3} through B`);

    // A started again on its folder and the database: it loads what B wrote meanwhile.
    const again = await startController(t, join(dir, 'a'), flags, a.address, 'debug');
    t.equal(await version(again), v3, 'A, restarted, is at the version B reached');
    t.same((await nodes(again)).map((n) => n.name).sort(), all.map((x) => x.name).sort(), 'with every member');
    again.proc.kill('SIGTERM');
    t.equal(await again.proc.exited, 0, 'and stops cleanly on SIGTERM (its database connections closed)');
  });
}

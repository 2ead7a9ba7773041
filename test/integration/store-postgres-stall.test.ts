/**
 * The event loop never waits on the database (issue 24): a replica on a PostgreSQL cluster of the
 * test's own, an agent on it, and the cluster's processes stopped (SIGSTOP: a stall, connections
 * open, nothing answers). An admin change then waits for its answer up to the batch timeout and is
 * refused MESHP_STORE_UNAVAILABLE; all that time the controller keeps serving: /metrics answers
 * within a fraction of the timeout at every look, the agent's stream stays open. Before the store
 * seam took changes without waiting, the controller's thread stood in Atomics.wait for the whole
 * batch timeout and no look was answered meanwhile. The processes continued, the replica serves
 * again by itself and a change reaches the agent. An agent that opens its stream during the stall
 * and one that enrols during it are refused MESHP_STORE_UNAVAILABLE without the loop waiting on
 * their reads (the hello's and the enrolment's), and both follow the network once it answers; so
 * are the admin calls on the tokens and the audit log, and a node list answers from memory.
 */
import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { DEFAULT_CALL_TIMEOUT_MS } from '@meshp/store-postgres';
import { adminCalls, startController, tokenFor, waitUntil, workdir } from '../helpers/grpc-procs.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { SimAgent } from '../helpers/sim-agent.js';
import { fileBudget, loadFactor } from '../helpers/budget.js';
import { scrape } from '../helpers/prom.js';
import { sigstop } from '../helpers/sigstop.js';

/** The cluster's processes: its postmaster (from its pid file) and every child of it. */
function clusterPids(dir: string): number[] {
  const master = Number(readFileSync(join(dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
  const children = execFileSync('ps', ['-o', 'pid=', '--ppid', String(master)])
    .toString()
    .split('\n')
    .map((l) => Number(l.trim()))
    .filter((n) => n > 0);
  return [master, ...children];
}

const missing = postgresMissing();
if (missing) t.plan(0, `skipped: the stall test needs a PostgreSQL cluster of its own: ${missing}`);
else {
  fileBudget(240);
  t.test('the database stalled under a replica: the change waits and is refused, the replica serves all the while', async (t) => {
    const cluster = startPostgres(t);
    const url = await cluster.createDb('stall');
    const state = join(workdir(t, 'pg-stall'), 'ctl');
    const ctl = await startController(t, state, ['--store', url, '--sync-flush-ms', '200']);
    const admin = adminCalls(() => ctl);
    const { fingerprint } = readAdminCredential(join(state, ADMIN_CREDENTIAL_FILE));
    const agent = new SimAgent('s0', ctl.address, fingerprint);
    t.teardown(() => agent.close());
    await agent.enrol(await tokenFor(ctl, ['all']));
    agent.open();
    await admin.policy([{ from: 'all', to: 'all' }]);
    const v0 = Number((await (await ctl.admin!()).call('listNodes', { network: 'default' })).nodes[0]!.stateVersion);
    await waitUntil('the agent current', () => agent.applier.appliedVersion === v0, 60_000);
    const streams = agent.streams;
    // An agent enrolled before the stall that opens its stream during it (its hello reads the
    // credential), and one that enrols during it: neither may hold up the event loop either.
    const late = new SimAgent('s1', ctl.address, fingerprint);
    t.teardown(() => late.close());
    await late.enrol(await tokenFor(ctl, ['all']));
    const newcomer = new SimAgent('s2', ctl.address, fingerprint);
    t.teardown(() => newcomer.close());
    const newcomerToken = await tokenFor(ctl, ['all']);

    // Stopped, not killed: its connections stay open and nothing answers on them.
    let stopped: number[] = [];
    const resume = () => {
      for (const pid of stopped) process.kill(pid, 'SIGCONT');
      stopped = [];
    };
    t.teardown(resume);
    stopped = clusterPids(cluster.dir);
    for (const pid of stopped) await sigstop(pid);

    const t0 = Date.now();
    const change = admin.policy([{ from: 'all', to: 'all', ports: ['443'] }]).then(
      () => null,
      (e: { code?: string }) => e.code ?? 'no code',
    );
    late.open();
    const enrolled = newcomer.enrol(newcomerToken).then(
      () => null,
      (e: { code?: string }) => e.code ?? 'no code',
    );
    // The admin calls that read or write the hosting's tables and the audit log, asked meanwhile.
    const direct = await ctl.admin!();
    const outcome = (p: Promise<unknown>) =>
      p.then(
        () => 'answered',
        (e: { code?: string }) => e.code ?? 'no code',
      );
    const calls = Promise.all([
      outcome(direct.call('listNodes', { network: 'default' })),
      outcome(direct.call('listEnrolmentTokens', { network: 'default' })),
      outcome(direct.call('createToken', { network: 'default', mode: 2, ttlSeconds: 600, tags: [] })),
      outcome(direct.call('listAudit', { network: 'default' })),
      outcome(direct.call('renameNode', { network: 'default', node: 's1', newName: 's1-renamed' })),
    ]);
    // Looks at /metrics while the change waits: each one answered, and quickly.
    let longest = 0;
    let looks = 0;
    let settled: string | null | undefined;
    void change.then((c) => (settled = c));
    while (settled === undefined) {
      const s = Date.now();
      await scrape(ctl.metrics);
      longest = Math.max(longest, Date.now() - s);
      looks++;
      await new Promise((r) => setTimeout(r, 100));
    }
    const waited = Date.now() - t0;
    t.equal(settled, 'MESHP_STORE_UNAVAILABLE', `the change refused MESHP_STORE_UNAVAILABLE after ${waited} ms`);
    t.ok(waited >= DEFAULT_CALL_TIMEOUT_MS * 0.8, 'after waiting for its answer (the batch timeout), not at once: the stall was there');
    t.ok(looks >= 10, `/metrics looked at ${looks} times while the change waited`);
    t.ok(
      longest / loadFactor() < DEFAULT_CALL_TIMEOUT_MS / 5,
      `the longest /metrics answer meanwhile: ${longest} ms (under a fifth of the ${DEFAULT_CALL_TIMEOUT_MS} ms batch timeout): the event loop did not wait`,
    );
    t.equal((await scrape(ctl.metrics)).value('meshp_controller_store_up'), 0, '/metrics: the store is down');
    t.equal(agent.streams, streams, "the agent's stream stayed open");
    t.equal(await enrolled, 'MESHP_STORE_UNAVAILABLE', 'the enrolment during the stall refused MESHP_STORE_UNAVAILABLE');
    const [nodes, tokens, token, auditLog, rename] = await calls;
    t.equal(nodes, 'answered', 'node list answered (the gaps and reports as this replica knows them)');
    t.same(
      [tokens, token, auditLog, rename],
      Array(4).fill('MESHP_STORE_UNAVAILABLE'),
      'token list, token create, audit list and node rename refused MESHP_STORE_UNAVAILABLE',
    );
    await waitUntil('the late hello answered', () => late.errors.length > 0, 30_000);
    t.equal(late.errors[0]!.code, 'MESHP_STORE_UNAVAILABLE', "the late agent's stream refused MESHP_STORE_UNAVAILABLE (it opens another)");
    t.equal(late.applier.appliedVersion, 0, 'and it was given nothing meanwhile');

    resume();
    // Back by itself: a change is taken again and reaches the agent on the stream it had.
    await waitUntil(
      'a change taken again',
      async () =>
        admin.policy([{ from: 'all', to: 'all', ports: ['8443'] }]).then(
          () => true,
          () => false,
        ),
      60_000,
    );
    const v1 = Number((await (await ctl.admin!()).call('listNodes', { network: 'default' })).nodes[0]!.stateVersion);
    t.ok(v1 > v0, `a later version (${v1})`);
    await waitUntil(`the agent at ${v1}`, () => agent.applier.appliedVersion === v1, 60_000);
    t.pass('the change reached the agent');
    t.equal(agent.streams, streams, 'still the stream it had');
    await waitUntil(`the late agent at ${v1}, on a stream it opened again`, () => late.applier.appliedVersion === v1, 60_000);
    await newcomer.enrol(newcomerToken);
    t.equal(newcomer.enrolment?.node, 's2', 'the token refused during the stall enrols once the database answers');
    newcomer.open();
    await waitUntil('the newcomer current', () => newcomer.applier.appliedVersion >= v1, 60_000);
    t.pass('the newcomer follows the network');
    // The rename and the removal, written to the hosting's tables without waiting, as they were.
    await direct.call('renameNode', { network: 'default', node: 's2', newName: 's2-renamed' });
    const names = (await direct.call('listNodes', { network: 'default' })).nodes.map((n: { name: string }) => n.name).sort();
    t.same(names, ['s0', 's1', 's2-renamed'], 'renamed once the database answers');
    // Its agent, started again with what it held (its key, its credential, the old name): its hello
    // is read as the renamed node's (the credential's owner and the rename, in one read).
    const again = new SimAgent('s2', ctl.address, fingerprint);
    t.teardown(() => again.close());
    (again as unknown as { key: SimAgent['key'] }).key = newcomer.key;
    again.enrolment = newcomer.enrolment;
    newcomer.close();
    again.open();
    await direct.call('removeNode', { network: 'default', node: 's1' });
    await waitUntil('the removed node told so', () => late.errors.some((e) => e.code === 'MESHP_NODE_REVOKED'), 30_000);
    t.pass('the removed node is told MESHP_NODE_REVOKED');
    await waitUntil(
      'the renamed node current after the removal',
      async () => {
        const n = (await direct.call('listNodes', { network: 'default' })).nodes.find((x: { name: string }) => x.name === 's2-renamed');
        return again.applier.appliedVersion === Number(n?.stateVersion) && again.errors.length === 0;
      },
      60_000,
    );
    t.pass("the renamed node's agent, under its old name, follows the network (its credential followed the name)");
    // The removed node's next stream: its key is on the revoked list (written without waiting).
    const revokedSaid = late.errors.filter((e) => e.code === 'MESHP_NODE_REVOKED').length;
    await waitUntil('the removed node refused again', () => late.errors.filter((e) => e.code === 'MESHP_NODE_REVOKED').length > revokedSaid, 30_000);
    t.match(late.errors.at(-1)!.message, /credential and key are revoked/, 'its hello refused: its credential and key are revoked');
    t.ok(ctl.proc.alive, 'the replica never exited');
  });
}

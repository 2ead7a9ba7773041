/**
 * A real `meshp agent` given two controller replicas (`--controller A --controller B`) that share
 * one PostgreSQL database (a cluster of the test's own, helpers/postgres.ts), over real gRPC on
 * 127.0.0.1. It enrols through A and converges; a spent token given to a second agent is refused by
 * A and never shown to B; A killed by its pid, the agent moves to B by itself, logs it, and a change
 * made through B reaches it (gap 0 on B). A started again and B hung (SIGSTOP), the keepalive notices
 * and the agent moves back to A. Started again on a controller.json of the old single-address form,
 * it still starts.
 */
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { adminCalls, nodes, replicaState, startAgent, startController, tokenFor, waitUntil, workdir, type ControllerProc } from '../helpers/grpc-procs.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { metricsText } from '../helpers/prom.js';

const missing = postgresMissing();
const CONF = '/etc/failover.conf';

if (missing) {
  t.plan(0, `skipped: the failover test needs a PostgreSQL cluster of its own: ${missing}`);
} else {
  t.test('an agent on two replicas: enrols on the first, moves to the second when the first is killed, and follows changes made there', async (t) => {
    const cluster = startPostgres(t);
    const url = await cluster.createDb('meshp');
    const dir = workdir(t, 'failover');
    const flags = ['--store', url, '--sync-flush-ms', '200'];
    const a = await startController(t, join(dir, 'a'), flags);
    replicaState(join(dir, 'a'), join(dir, 'b'));
    const b = await startController(t, join(dir, 'b'), flags);
    const { fingerprint } = readAdminCredential(join(dir, 'a', ADMIN_CREDENTIAL_FILE));

    /** The agent's row on `ctl` says it applied the replica's version and its gap is 0. */
    const current = async (ctl: ControllerProc, name: string) => {
      const row = (await nodes(ctl)).find((r) => r.name === name);
      return row && row.gap === 0 && row.appliedVersion === row.stateVersion && row.stateVersion > 0 ? row : false;
    };

    const token = await tokenFor(a, ['all']);
    const x = startAgent(t, dir, 'x', [a.address, b.address], token);
    await x.proc.waitFor((l) => l.msg === 'enrolled', 60_000);
    await waitUntil('x at gap 0 on A', () => current(a, 'x'), 60_000);
    t.match(
      x.proc.lines.find((l) => l.msg === 'on controller'),
      { controller: a.address },
      'x says it is on A, the first address',
    );
    t.same(
      JSON.parse(readFileSync(join(x.state, 'controller.json'), 'utf8')),
      { address: a.address, addresses: [a.address, b.address], fingerprint },
      'controller.json keeps both addresses and the one pin',
    );

    await t.test('a coded enrolment refusal is final: the spent token is never shown to the second address', async (t) => {
      const aMark = a.proc.lines.length;
      const bMark = b.proc.lines.length;
      const y = startAgent(t, dir, 'y', [a.address, b.address], token);
      t.equal(await y.proc.exited, 1, 'the agent with a spent token exits 1');
      t.match(y.proc.stderr, /^MESHP_TOKEN_INVALID/, `and says why in one line: ${y.proc.stderr.trim()}`);
      await a.proc.waitFor((l) => l.msg === 'enrolment refused' && l.node === 'y', 15_000, aMark);
      t.pass('A refused the Enrol');
      t.same(
        b.proc.lines.slice(bMark).filter((l) => /enrol/i.test(String(l.msg))),
        [],
        'B logged no Enrol call',
      );
      t.notMatch(await metricsText(b.metrics), /meshp_refusals_total\{code="MESHP_TOKEN/, "and B's refusals count none");
      t.notOk(
        y.proc.lines.some((l) => l.msg === 'controller unavailable; trying the next'),
        'the agent did not move on',
      );
    });

    await t.test('A killed by its pid: the agent moves to B, says so, and a change made through B reaches it', async (t) => {
      const mark = x.proc.lines.length;
      const bMark = b.proc.lines.length;
      const killedAt = Date.now();
      a.proc.kill('SIGKILL');
      await a.proc.exited;
      const moved = await x.proc.waitFor((l) => l.msg === 'on controller' && l.controller === b.address, 60_000, mark);
      t.equal(moved.from, a.address, `the agent's log names B, and A it came from: ${JSON.stringify(moved)}`);
      t.comment(`on B ${Number(moved.time) - killedAt} ms after the kill (load ${loadavg()[0]!.toFixed(1)})`);
      const opened = await b.proc.waitFor((l) => l.msg === 'sync stream opened' && l.node === 'x', 30_000, bMark);
      t.equal(opened.resume, true, 'x resumed on B from the version it applied on A');
      await waitUntil('x at gap 0 on B', () => current(b, 'x'), 60_000);
      t.same(
        b.proc.lines.slice(bMark).filter((l) => l.msg === 'snapshot sent' && l.node === 'x'),
        [],
        'no snapshot: it was current',
      );
      t.match(
        x.proc.lines.slice(mark).find((l) => l.msg === 'controller unavailable; trying the next'),
        { controller: a.address, next: b.address, code: 'MESHP_UNAVAILABLE' },
        'and why it left A',
      );

      const admin = adminCalls(() => b);
      const before = (await nodes(b)).find((r) => r.name === 'x')!.stateVersion;
      await admin.policy([{ from: 'all', to: 'all', ports: ['443'] }]);
      await admin.catalogue([{ name: 'failover', files: [{ path: CONF, content: 'through B\n' }] }]);
      await admin.assign('x', 'failover');
      const row = await waitUntil(
        'x at gap 0 on B after the changes made through B',
        async () => {
          const r = await current(b, 'x');
          return r && r.stateVersion > before ? r : false;
        },
        60_000,
      );
      t.ok(row.stateVersion >= before + 3, `B's versions ${before} → ${row.stateVersion}, x applied it, gap 0 (read on B over the admin API)`);
      await waitUntil(
        'the module file written',
        () => {
          try {
            return readFileSync(join(x.root, CONF), 'utf8') === 'through B\n';
          } catch {
            return false;
          }
        },
        30_000,
      );
      t.pass("the module assigned through B is on x's machine");
    });

    // A started again on its address; the agent stays on B (it moves only when its replica is lost).
    const a2 = await startController(t, join(dir, 'a'), flags, a.address);

    await t.test('B hangs (SIGSTOP: its sockets open, nothing answered): the keepalive notices, and the agent moves back to A', async (t) => {
      const mark = x.proc.lines.length;
      const aMark = a2.proc.lines.length;
      const stoppedAt = Date.now();
      process.kill(b.proc.pid, 'SIGSTOP');
      t.teardown(() => b.proc.kill('SIGKILL'));
      const moved = await x.proc.waitFor((l) => l.msg === 'on controller' && l.controller === a.address, 120_000, mark);
      t.equal(moved.from, b.address, 'the log names A, and B it came from');
      t.comment(
        `on A ${Number(moved.time) - stoppedAt} ms after B stopped (keepalive: a ping after 20 s idle, 10 s for its answer; load ${loadavg()[0]!.toFixed(1)})`,
      );
      t.match(
        x.proc.lines.slice(mark).find((l) => l.msg === 'controller unavailable; trying the next'),
        { controller: b.address, next: a.address, code: 'MESHP_UNAVAILABLE' },
        'lost as unavailable',
      );
      const before = (await nodes(a2)).find((r) => r.name === 'x')!.stateVersion;
      await adminCalls(() => a2).policy([{ from: 'all', to: 'all', ports: ['8443'] }]);
      await waitUntil(
        'x at gap 0 on A after a change made there',
        async () => {
          const r = await current(a2, 'x');
          return r && r.stateVersion > before ? r : false;
        },
        60_000,
      );
      t.ok(
        a2.proc.lines.slice(aMark).some((l) => l.msg === 'sync stream opened' && l.node === 'x' && l.resume === true),
        'resumed on A',
      );
      b.proc.kill('SIGKILL');
      await b.proc.exited;
    });

    await t.test('controller.json in the old single-address form (an agent upgraded in place) still starts', async (t) => {
      x.proc.kill('SIGTERM');
      t.equal(await x.proc.exited, 0, 'x stopped cleanly');
      writeFileSync(join(x.state, 'controller.json'), `${JSON.stringify({ address: a.address, fingerprint })}\n`, { mode: 0o600 });
      const again = startAgent(t, dir, 'x', []);
      const on = await again.proc.waitFor((l) => l.msg === 'on controller', 60_000);
      t.equal(on.controller, a.address, 'started on the address kept, no --controller, no token');
      await waitUntil('x at gap 0 on A again', () => current(a2, 'x'), 60_000);
      t.same(
        JSON.parse(readFileSync(join(x.state, 'controller.json'), 'utf8')),
        { address: a.address, addresses: [a.address], fingerprint },
        'and kept it in the new form',
      );
      again.proc.kill('SIGTERM');
      t.equal(await again.proc.exited, 0, 'and stops cleanly');
    });
  });
}

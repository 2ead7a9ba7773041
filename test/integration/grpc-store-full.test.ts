/**
 * A full disk under the SQLite controller, with agents connected (issue 24): the controller's state
 * folder is on a tmpfs the test mounts, a real `meshp controller serve` serves two sim agents over
 * gRPC on loopback. The agents ack a change; the tmpfs is filled (a file of the test's own) before
 * the group commit writes those acks. Then: the flush fails and keeps its records, the store is
 * said down (log, /metrics), `module assign` and `policy set` are refused MESHP_STORE_FULL (the
 * Admin call and the CLI), a report whose write fails is answered MESHP_STORE_FULL on the stream,
 * `node list` never shows the refused change, the process keeps running and its agents' streams
 * stay open. The filler removed: the kept records reach the file, the
 * store is up again, and a change reaches the agents over the streams they had all along.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import { statfsSync } from 'node:fs';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { adminCalls, meshpAsync, startController, tokenFor, waitUntil, workdir, writeJson, type ControllerProc } from '../helpers/grpc-procs.js';
import { SimAgent } from '../helpers/sim-agent.js';
import { scrape } from '../helpers/prom.js';
import { canMount, tmpfs } from '../helpers/tmpfs.js';

/** The sync records as the file holds them, by node (read by a connection of the test's own). */
function storedApplied(file: string): Map<string, number> {
  const db = new Database(file, { readonly: true, fileMustExist: true });
  try {
    // The applied version is a column (ADR 0044); a row of before the columns keeps it in its document.
    const rows = db.prepare("SELECT id, COALESCE(applied, json_extract(doc, '$.applied')) AS applied FROM sync").all() as { id: string; applied: number }[];
    return new Map(rows.map((r) => [r.id, r.applied]));
  } finally {
    db.close();
  }
}

async function listed(ctl: ControllerProc): Promise<{ name: string; stateVersion: number; assigned: string[] }[]> {
  const r = await (await ctl.admin!()).call('listNodes', { network: 'default' });
  return r.nodes.map((n) => ({ name: n.name, stateVersion: Number(n.stateVersion), assigned: [...n.assignedModules] }));
}

t.test(
  'a full disk under the SQLite controller: changes refused MESHP_STORE_FULL, nothing refused shows, the process and its streams stay, a change goes through once space is back',
  { skip: canMount() ? false : 'needs root to mount a tmpfs (CI runs the suite as root)' },
  async (t) => {
    const dir = workdir(t, 'store-full');
    // The controller is gone before the unmount (it holds its files there).
    const held: { proc?: ControllerProc['proc'] } = {};
    const disk = tmpfs(t, 16 * 1024, async () => {
      held.proc?.kill('SIGKILL');
      await held.proc?.exited;
    });
    const state = join(disk.dir, 'ctl');
    const db = join(state, 'controller.db');
    // A group commit long enough for the disk to fill between the acks and their flush.
    const ctl = await startController(t, state, ['--sync-flush-ms', '4000']);
    held.proc = ctl.proc;
    const admin = adminCalls(() => ctl);
    const { fingerprint } = readAdminCredential(join(state, ADMIN_CREDENTIAL_FILE));
    const agents = ['s0', 's1'].map((n) => new SimAgent(n, ctl.address, fingerprint));
    t.teardown(() => agents.forEach((a) => a.close()));
    for (const a of agents) await a.enrol(await tokenFor(ctl, ['all']));
    await admin.catalogue([{ name: 'm', files: [{ path: '/etc/m.conf', content: 'm\n' }] }]);
    await admin.policy([{ from: 'all', to: 'all' }]);
    for (const a of agents) a.open();
    const atVersion = (v: number) => agents.every((a) => a.applier.appliedVersion === v);
    const v0 = (await listed(ctl))[0]!.stateVersion;
    await waitUntil('both agents current', () => atVersion(v0), 60_000);

    // What they acked so far is on the file: no flush is pending when the change below arms the next one.
    await waitUntil('the acks so far flushed', () => [...storedApplied(db).values()].every((v) => v === v0) && storedApplied(db).size === 2, 20_000);
    // A change both agents ack; the disk fills before the group commit writes what they acked.
    await admin.policy([{ from: 'all', to: 'all', ports: ['443'] }]);
    const top = v0 + 1;
    await waitUntil('both agents acked the change', async () => atVersion(top) && (await listed(ctl)).every((n) => n.stateVersion === top), 3_000);
    const mark = ctl.proc.lines.length;
    disk.fill();
    t.equal(statfsSync(disk.dir).bavail, 0, "the tmpfs is full (a file of the test's own)");

    // The flush fails on the full disk: the store is said down once, the process goes on.
    const down = await ctl.proc.waitFor((l) => l.msg?.startsWith('store down') === true, 20_000, mark);
    t.equal(down.code, 'MESHP_STORE_FULL', 'the failed flush said the store down, MESHP_STORE_FULL');
    t.ok(
      [...storedApplied(db).values()].every((v) => v < top),
      'the file does not hold the acks yet (the flush that failed wrote none of them)',
    );

    await t.rejects(admin.assign('s0', 'm'), { code: 'MESHP_STORE_FULL' }, 'module assign refused MESHP_STORE_FULL');
    await t.rejects(admin.policy([{ from: 'all', to: 'all', ports: ['80'] }]), { code: 'MESHP_STORE_FULL' }, 'policy set refused MESHP_STORE_FULL');
    const cli = await meshpAsync(
      'policy',
      'set',
      writeJson(dir, 'p.json', { rules: [{ from: 'all', to: 'all', ports: ['8080'] }] }),
      '--yes',
      '--state',
      state,
      '--controller',
      ctl.address,
    );
    t.not(cli.code, 0, 'the CLI exits non-zero');
    t.match(cli.err, /MESHP_STORE_FULL/, `the operator reads the code: ${cli.err.trim()}`);

    // A report whose copy for doctor the store refuses: the agent is told, its stream stays open.
    const marked = ctl.proc.lines.length;
    t.ok(
      agents[1]!.send({
        report: { appliedVersion: top, mode: 'converged', firewallKind: 'none', firewallActive: false, resources: [], at: new Date().toISOString() },
      }),
      's1 sends a report',
    );
    await ctl.proc.waitFor((l) => l.msg === 'store refused: report not stored', 10_000, marked);
    await waitUntil('s1 told why', () => agents[1]!.errors.some((e) => e.code === 'MESHP_STORE_FULL'), 10_000);
    t.pass('the report refused with MESHP_STORE_FULL to the agent, in a message on its stream');

    // Reads answer from memory, and show nothing of what was refused.
    const during = await listed(ctl);
    t.ok(
      during.every((n) => n.stateVersion === top),
      `node list: still version ${top}`,
    );
    t.same(during.find((n) => n.name === 's0')?.assigned, [], 'node list: the refused assignment is nowhere');
    const m = await scrape(ctl.metrics);
    t.equal(m.value('meshp_controller_store_up'), 0, '/metrics: meshp_controller_store_up 0');
    t.ok((m.value('meshp_controller_store_errors_total', { code: 'MESHP_STORE_FULL' }) ?? 0) >= 3, '/metrics: the store errors counted by code');

    // Flushes are tried again meanwhile (backoff): the process and its agents' streams stay.
    await new Promise((r) => setTimeout(r, 8_000));
    t.ok(ctl.proc.alive, 'the controller process is running');
    t.equal(ctl.proc.lines.slice(mark).filter((l) => l.msg?.startsWith('store down') === true).length, 1, 'the outage is logged once');
    t.same(
      agents.map((a) => a.streams),
      [1, 1],
      'no agent stream ended',
    );

    disk.free();
    await ctl.proc.waitFor((l) => l.msg?.startsWith('store up again') === true, 30_000, mark);
    await waitUntil('the kept records written', () => [...storedApplied(db).values()].every((v) => v === top), 20_000);
    t.pass(`the flush that failed kept its records: the file holds both acks of version ${top}`);
    t.equal((await scrape(ctl.metrics)).value('meshp_controller_store_up'), 1, '/metrics: meshp_controller_store_up 1');

    // Changes reach the agents over the streams they had all along.
    await admin.assign('s0', 'm');
    await waitUntil('the assignment applied by s0', () => agents[0]!.applier.appliedVersion === top + 1, 20_000);
    t.same((await listed(ctl)).find((n) => n.name === 's0')?.assigned, ['m'], 'node list: the assignment made once space was back');
    await admin.policy([{ from: 'all', to: 'all', ports: ['80'] }]);
    await waitUntil('the policy applied by both agents', () => atVersion(top + 2), 20_000);
    t.same(
      agents.map((a) => a.streams),
      [1, 1],
      'still the first stream of each agent',
    );
    t.ok(ctl.proc.alive, 'the controller process is running');
    ctl.proc.kill('SIGTERM');
    t.equal(await ctl.proc.exited, 0, 'and stops cleanly on SIGTERM after the outage');
  },
);

/**
 * A controller restored from a backup of its state, as real processes on 127.0.0.1: the agents had
 * applied versions the restored copy never reached. The controller moves its versions past theirs,
 * they take its snapshot (what the backup declares) and follow its changes from there.
 */
import t from 'tap';
import { copyFileSync, existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import {
  adminCalls,
  startAgent,
  startController,
  waitUntil,
  workdir,
  type AgentProc,
  type ControllerProc,
  nodes as listNodes,
  tokenFor,
} from '../helpers/grpc-procs.js';

const CONF = '/etc/web/web.conf';

function content(a: AgentProc): string | null {
  const f = join(a.root, CONF);
  return existsSync(f) ? readFileSync(f, 'utf8') : null;
}

async function stop(ctl: ControllerProc): Promise<void> {
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;
}

t.test('agents ahead of a controller restored from a backup take its state and follow it', async (t) => {
  const dir = workdir(t, 'restore');
  const state = join(dir, 'ctl');
  const db = join(state, 'controller.db');
  const backup = join(dir, 'controller.db.backup');
  let ctl = await startController(t, state);
  // The restored controller's behaviour is under test here, not the CLI: admin calls from this process
  // (read at each call: the helper follows the controller through its restarts). Each call still asserts it succeeded.
  const admin = adminCalls(() => ctl);
  const defineWeb = (v: string) => t.resolves(admin.catalogue([{ name: 'web', files: [{ path: CONF, content: `${v}\n` }] }]), `catalogue add web ${v}`);
  const settled = (agents: AgentProc[], v: string) =>
    waitUntil(`every node at gap 0 with ${v}`, async () => {
      const nodes = await listNodes(ctl);
      return nodes.length === agents.length && nodes.every((n) => n.gap === 0) && agents.every((a) => content(a) === `${v}\n`) && nodes;
    });

  await defineWeb('v1');
  const tokens = await Promise.all(['r1', 'r2'].map(() => tokenFor(ctl)));
  const agents = ['r1', 'r2'].map((name, i) => startAgent(t, dir, name, ctl.address, tokens[i]));
  for (const a of agents) await a.proc.waitFor((l) => l.msg === 'applied' && l.snapshot === true);
  for (const a of agents) await t.resolves(admin.assign(a.name, 'web'), `module assign ${a.name} web`);
  const atBackup = (await settled(agents, 'v1'))[0]!.stateVersion;

  // The backup: the state as it is now, copied while the controller is stopped.
  await stop(ctl);
  copyFileSync(db, backup);
  ctl = await startController(t, state, [], ctl.address);
  await defineWeb('v2');
  await defineWeb('v3');
  const seen = (await settled(agents, 'v3'))[0]!.stateVersion;
  t.ok(seen > atBackup, `the agents went on to version ${seen}, past the backup's ${atBackup}`);

  // Restored: the controller is back at the backup's version, the agents are ahead of it.
  await stop(ctl);
  for (const f of [db, `${db}-wal`, `${db}-shm`]) rmSync(f, { force: true });
  copyFileSync(backup, db);
  const marks = agents.map((a) => a.proc.lines.length);
  ctl = await startController(t, state, [], ctl.address);
  const moved = await ctl.proc.waitFor((l) => l.msg !== undefined && l.msg.startsWith('an agent had applied a version past'), 30_000);
  t.equal(moved.from, atBackup, 'the restored controller started from the backup');
  t.ok(Number(moved.to) > seen, `and moved to ${moved.to}, past every version an agent had seen (${seen})`);

  const nodes = await settled(agents, 'v1');
  t.ok(
    nodes.every((n) => n.stateVersion === moved.to && n.appliedVersion === moved.to),
    'both nodes applied the moved version',
  );
  // The controller's settled view can come before the agents' own log lines are read in through their pipes.
  for (const [i, a] of agents.entries()) await a.proc.waitFor((l) => l.msg === 'applied' && l.toVersion === moved.to, 15_000, marks[i]);
  agents.forEach((a, i) => {
    const since = a.proc.applied(marks[i]);
    t.equal(since[0]?.snapshot, true, `${a.name}: took the restored controller's snapshot`);
    t.equal(since[0]?.toVersion, moved.to);
  });

  // From there, the restored controller's changes arrive as deltas.
  await defineWeb('v4');
  const last = (await settled(agents, 'v4'))[0]!.stateVersion;
  for (const [i, a] of agents.entries()) await a.proc.waitFor((l) => l.msg === 'applied' && l.toVersion === last, 15_000, marks[i]);
  agents.forEach((a, i) => {
    const after = a.proc.applied(marks[i]).slice(1);
    t.ok(after.length >= 1 && after.every((l) => l.snapshot === false), `${a.name}: deltas after the snapshot (${after.length})`);
  });
});

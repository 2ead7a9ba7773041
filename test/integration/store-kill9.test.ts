/**
 * Kill -9 under store faults (issue 24): a real `meshp controller serve` with an agent connected,
 * random admin changes interleaved with random faults of its store — the SQLite controller's state
 * folder on a tmpfs the test fills and frees; a PostgreSQL cluster of the test's own stopped as by a
 * crash and started again — and a SIGKILL at a random point, sometimes while a change is in flight.
 * Then the store is healed and the controller started again on the same state. Counted over every
 * schedule: a refused change shown anyway (goal 0), a change answered done but gone after the
 * restart (goal 0), a restart whose memory differs from what the database holds (goal 0). After the
 * restart a change reaches the agent. The schedules are drawn by fast-check from a fixed seed
 * (MESHP_FC_SEED to draw others).
 */
import t from 'tap';
import fc from 'fast-check';
import Database from 'better-sqlite3';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { isMeshpError } from '@meshp/core';
import { adminCalls, startController, tokenFor, waitUntil, workdir, type ControllerProc } from '../helpers/grpc-procs.js';
import { SimAgent } from '../helpers/sim-agent.js';
import { canMount, tmpfs } from '../helpers/tmpfs.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';
import { fileBudget } from '../helpers/budget.js';
import type { Subtest } from '../helpers/tap-types.js';

const MODULES = ['m0', 'm1', 'm2'];
const NODE = 's0';

type Step = { k: 'assign' | 'unassign'; m: string } | { k: 'policy'; port: number } | { k: 'fault' } | { k: 'heal' };

const step: fc.Arbitrary<Step> = fc.oneof(
  { weight: 3, arbitrary: fc.record({ k: fc.constantFrom('assign' as const, 'unassign' as const), m: fc.constantFrom(...MODULES) }) },
  { weight: 2, arbitrary: fc.record({ k: fc.constant('policy' as const), port: fc.integer({ min: 1000, max: 1099 }) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('fault' as const) }) },
  { weight: 1, arbitrary: fc.record({ k: fc.constant('heal' as const) }) },
);
/** A schedule: its steps, the step at which the SIGKILL comes (== length: after the last), and how long after that step was sent. */
const schedule = fc
  .array(step, { minLength: 4, maxLength: 10 })
  .chain((steps) => fc.record({ steps: fc.constant(steps), killAt: fc.integer({ min: 0, max: steps.length }), killAfterMs: fc.integer({ min: 0, max: 30 }) }));
type Schedule = fc.Arbitrary<{ steps: Step[]; killAt: number; killAfterMs: number }> extends fc.Arbitrary<infer T> ? T : never;

/** What the controller shows of the node and the network. */
interface Shown {
  assigned: string[];
  version: number;
}

/** One store kind: how its controller starts, how its store is hurt and healed, and what its database holds. */
interface Kind {
  name: string;
  start(t: Subtest, state: string, address?: string): Promise<ControllerProc>;
  fault(): void;
  heal(): void;
  stored(): Promise<Shown>;
}

const FLAGS = ['--sync-flush-ms', '300'];

async function shownBy(ctl: ControllerProc): Promise<Shown> {
  const admin = await ctl.admin!();
  const row = (await admin.call('showNode', { network: 'default', node: NODE })).node!;
  return { assigned: [...row.assignedModules].sort(), version: Number(row.stateVersion) };
}

/** What the database holds of the same (its member record and the network's), parsed from the documents the stores keep. */
function fromDocs(member: string | object, network: string | object): Shown {
  const m = (typeof member === 'string' ? JSON.parse(member) : member) as { assigned: string[] };
  const n = (typeof network === 'string' ? JSON.parse(network) : network) as { version: number };
  return { assigned: [...m.assigned].sort(), version: n.version };
}

const tally = { schedules: 0, steps: 0, refused: 0, refusedButVisible: 0, doneButLost: 0, restartDiffers: 0, inflight: 0, codes: new Map<string, number>() };

async function runSchedule(t: Subtest, kind: Kind, s: Schedule, state: string): Promise<void> {
  let ctl = await kind.start(t, state);
  const admin = adminCalls(() => ctl);
  const { fingerprint } = readAdminCredential(join(state, ADMIN_CREDENTIAL_FILE));
  const agent = new SimAgent(NODE, ctl.address, fingerprint);
  t.teardown(() => agent.close());
  await agent.enrol(await tokenFor(ctl, ['all']));
  await admin.catalogue(MODULES.map((name) => ({ name, files: [{ path: `/etc/${name}.conf`, content: `${name}\n` }] })));
  await admin.policy([{ from: 'all', to: 'all' }]);
  agent.open();
  // The model: what the controller was told done, in order.
  const model = new Set<string>();
  let inflight: Step | null = null;
  const send = (x: Step): Promise<unknown> | null => {
    if (x.k === 'fault') return (kind.fault(), null);
    if (x.k === 'heal') return (kind.heal(), null);
    if (x.k === 'policy') return admin.policy([{ from: 'all', to: 'all', ports: [String(x.port)] }]);
    return x.k === 'assign' ? admin.assign(NODE, x.m) : admin.unassign(NODE, x.m);
  };
  const take = (x: Step) => {
    if (x.k === 'assign') model.add(x.m);
    if (x.k === 'unassign') model.delete(x.m);
  };
  for (let i = 0; i < s.steps.length; i++) {
    const x = s.steps[i]!;
    const before = await shownBy(ctl);
    const call = send(x);
    if (i === s.killAt) {
      // The kill while the call may be anywhere: sent, being written, committed but not answered.
      const settled = call?.then(
        () => null,
        (e: unknown) => e,
      );
      await new Promise((r) => setTimeout(r, s.killAfterMs));
      ctl.proc.kill('SIGKILL');
      await ctl.proc.exited;
      await settled;
      if (call) inflight = x;
      break;
    }
    tally.steps++;
    if (!call) continue;
    try {
      await call;
      take(x);
    } catch (e) {
      if (!isMeshpError(e) && !(e as { code?: string }).code) throw e;
      const code = (e as { code: string }).code;
      if (code !== 'MESHP_STORE_FULL' && code !== 'MESHP_STORE_UNAVAILABLE') throw e;
      tally.refused++;
      tally.codes.set(code, (tally.codes.get(code) ?? 0) + 1);
      const after = await shownBy(ctl);
      if (JSON.stringify(after) !== JSON.stringify(before)) tally.refusedButVisible++;
    }
  }
  if (ctl.proc.alive) {
    ctl.proc.kill('SIGKILL');
    await ctl.proc.exited;
  }
  // Healed, then started again on the same state and address (the agent reconnects to it).
  kind.heal();
  ctl = await kind.start(t, state, ctl.address);
  const back = await shownBy(ctl);
  const want = [...model].sort();
  const alt = inflight ? (() => (take(inflight), [...model].sort()))() : want;
  if (inflight) tally.inflight++;
  const sameAs = (a: string[], b: string[]) => JSON.stringify(a) === JSON.stringify(b);
  if (!sameAs(back.assigned, want) && !sameAs(back.assigned, alt)) tally.doneButLost++;
  if (JSON.stringify(await kind.stored()) !== JSON.stringify(back)) tally.restartDiffers++;
  // And the truth reaches the agent: a change after the restart is applied by it.
  await admin.policy([{ from: 'all', to: 'all', ports: ['9'] }]);
  const top = (await shownBy(ctl)).version;
  await waitUntil(`${NODE} applied ${top} after the restart`, () => agent.applier.appliedVersion === top, 60_000);
  tally.schedules++;
  agent.close();
  ctl.proc.kill('SIGKILL');
  await ctl.proc.exited;
}

const SEED = Number(process.env.MESHP_FC_SEED ?? 2424);
const RUNS = 4;

function report(t: Subtest, name: string): void {
  t.comment(
    `${name}: schedules ${tally.schedules}, steps ${tally.steps}, refused ${tally.refused} ${JSON.stringify([...tally.codes])}, killed in flight ${tally.inflight}, refused but visible ${tally.refusedButVisible}, done but lost ${tally.doneButLost}, restarts differing from the database ${tally.restartDiffers}`,
  );
  t.equal(tally.schedules, RUNS, `every schedule ran to its end (${RUNS})`);
  t.equal(tally.refusedButVisible, 0, 'refused changes shown anyway: 0');
  t.equal(tally.doneButLost, 0, 'changes answered done, gone after the kill: 0');
  t.equal(tally.restartDiffers, 0, 'restarts whose memory differs from the database: 0');
  t.ok(tally.refused > 0, 'the faults struck: some changes were refused');
  tally.schedules = tally.steps = tally.refused = tally.refusedButVisible = tally.doneButLost = tally.restartDiffers = tally.inflight = 0;
  tally.codes.clear();
}

/** Schedules drawn from the seed; every one with a fault before a change, so each run is refused somewhere. */
function draw(): Schedule[] {
  const withFault = schedule.filter((s) => {
    const f = s.steps.findIndex((x) => x.k === 'fault');
    return f >= 0 && s.steps.slice(f + 1, s.killAt + 1).some((x) => x.k !== 'fault' && x.k !== 'heal');
  });
  return fc.sample(withFault, { numRuns: RUNS, seed: SEED });
}

fileBudget(420);

t.test(
  'SQLite on a tmpfs filled and freed, kill -9 anywhere: nothing refused shows, nothing done is lost, the restart equals the file',
  { skip: canMount() ? false : 'needs root to mount a tmpfs (CI runs the suite as root)' },
  async (t) => {
    for (const [i, s] of draw().entries()) {
      await t.test(`schedule ${i}: ${s.steps.map((x) => x.k).join(' ')}, kill at ${s.killAt} +${s.killAfterMs} ms`, async (t) => {
        const held: { ctl?: ControllerProc } = {};
        const disk = tmpfs(t, 16 * 1024, async () => {
          held.ctl?.proc.kill('SIGKILL');
          await held.ctl?.proc.exited;
        });
        const state = join(disk.dir, 'ctl');
        let full = false;
        const kind: Kind = {
          name: 'sqlite',
          start: async (t, st, address) => (held.ctl = await startController(t, st, FLAGS, address)),
          fault: () => {
            if (!full) disk.fill();
            full = true;
          },
          heal: () => {
            if (full) disk.free();
            full = false;
          },
          stored: async () => {
            const db = new Database(join(state, 'controller.db'), { readonly: true, fileMustExist: true });
            try {
              const m = db.prepare('SELECT doc FROM members WHERE network = ? AND id = ?').get('default', NODE) as { doc: string };
              const n = db.prepare('SELECT doc FROM networks WHERE name = ?').get('default') as { doc: string };
              return fromDocs(m.doc, n.doc);
            } finally {
              db.close();
            }
          },
        };
        await runSchedule(t, kind, s, state);
      });
    }
    report(t, 'sqlite');
  },
);

const pgMissing = postgresMissing();
t.test(
  'PostgreSQL stopped and started, kill -9 anywhere: nothing refused shows, nothing done is lost, the restart equals the database',
  { skip: pgMissing ? `needs a PostgreSQL cluster of its own: ${pgMissing}` : false },
  async (t) => {
    const cluster = startPostgres(t);
    for (const [i, s] of draw().entries()) {
      await t.test(`schedule ${i}: ${s.steps.map((x) => x.k).join(' ')}, kill at ${s.killAt} +${s.killAfterMs} ms`, async (t) => {
        const url = await cluster.createDb(`kill9_${i}`);
        const state = join(workdir(t, `kill9-pg-${i}`), 'ctl');
        let down = false;
        // A schedule that failed half-way leaves the cluster up for the next one.
        t.teardown(() => {
          if (down) cluster.start();
          down = false;
        });
        const kind: Kind = {
          name: 'postgres',
          start: (t, st, address) => startController(t, st, ['--store', url, ...FLAGS], address),
          fault: () => {
            if (!down) cluster.stop();
            down = true;
          },
          heal: () => {
            if (down) cluster.start();
            down = false;
          },
          stored: async () => {
            const [m] = await cluster.query<{ doc: object }>(`kill9_${i}`, 'SELECT doc FROM members WHERE network = $1 AND id = $2', ['default', NODE]);
            const [n] = await cluster.query<{ doc: object }>(`kill9_${i}`, 'SELECT doc FROM networks WHERE name = $1', ['default']);
            return fromDocs(m!.doc, n!.doc);
          },
        };
        await runSchedule(t, kind, s, state);
      });
    }
    report(t, 'postgres');
  },
);

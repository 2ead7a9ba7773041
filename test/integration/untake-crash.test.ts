/**
 * Untake killed with SIGKILL at every boundary of its writes and records (issue 29), then run again: it
 * completes, the found files are their originals byte for byte with their modes, the module is held
 * again, and the note of the untake under way is cleared. A restart never reads a file it put back as
 * changed by something else. The same through the agent's path (an untake the controller asked, to a
 * preview id): killed at each boundary, the agent's next reconcile completes it or reports it, with one
 * outcome kept, never the module half put back without saying so.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, chmodSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { LocalFileStore } from '@meshp/files-local';
import { PLUGIN_API_VERSION, type Declaration, type Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { Reconciler, untake, UNTAKE_KEY } from '@meshp/core/reconcile';
import { untakesAsked, UNTAKES_KEY } from '@meshp/core/agent';
import { declarationFromWire, declarationToWire } from '@meshp/core/delta';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), '../helpers/crash-untake.mjs');
const A = '/etc/web/web.conf';
const B = '/etc/web/site.conf';
const A_BYTES = Buffer.from([0x70, 0x72, 0x65, 0x00, 0xff, 0x0a]);
const B_BYTES = Buffer.from('predecessor site\n');

const decl = (taken: boolean) => ({
  apiVersion: 'meshp/v1',
  node: 'n1',
  mode: 'adopted',
  settings: { ports: {} },
  modules: [
    {
      name: 'web',
      taken,
      files: [
        { path: A, content: 'mesh web\n' },
        { path: B, content: 'mesh site\n', mode: '0600' },
      ],
    },
  ],
});

const dir = mkdtempSync(join(tmpdir(), 'meshp-untake-crash-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const declFile = join(dir, 'taken.json');
writeFileSync(declFile, JSON.stringify(decl(true)));

function hostOn(m: { root: string; state: string }): Host {
  const plugin: Plugin = {
    name: 'restart',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.files.tapPromise('restart', async (o) => new LocalFileStore(o.root));
      host.hooks.state.tapPromise('restart', async (o) => new SqliteHostStore(o.stateDir));
    },
  };
  return new Host({ root: m.root, stateDir: m.state }).use(plugin);
}

const base = { root: join(dir, 'base', 'root'), state: join(dir, 'base', 'state') };
for (const [p, bytes, mode] of [
  [A, A_BYTES, 0o640],
  [B, B_BYTES, 0o644],
] as const) {
  mkdirSync(dirname(join(base.root, p)), { recursive: true });
  writeFileSync(join(base.root, p), bytes);
  chmodSync(join(base.root, p), mode);
}
for (const taken of [false, true]) {
  const h = hostOn(base);
  await new Reconciler(h).reconcile(decl(taken));
  await h.close();
}

function copyBase(name: string) {
  const d = join(dir, name);
  cpSync(join(dir, 'base'), d, { recursive: true });
  return { root: join(d, 'root'), state: join(d, 'state') };
}
const run = (m: { root: string; state: string }, killAt: number) =>
  spawnSync(process.execPath, [SCRIPT, m.root, m.state, declFile, 'web', String(killAt)], { encoding: 'utf8' });

const whole = run(copyBase('whole'), 0);
if (whole.status !== 0) throw new Error(whole.stderr);
const { points, steps } = JSON.parse(whole.stdout) as { points: number; steps: number };

t.test(`killed at each of the ${points} boundaries of an untake, then untaken again`, async (t) => {
  t.equal(steps, 2, 'two found files put back');
  t.ok(points >= 8, `an untake has ${points} kill points`);
  for (let n = 1; n <= points; n++) {
    const m = copyBase(`kill-${n}`);
    const killed = run(m, n);
    t.equal(killed.signal, 'SIGKILL', `point ${n}: killed`);
    const h = hostOn(m);
    const again = await untake(h, decl(true), 'web').catch((e: Error) => e);
    await h.close();
    t.notOk(again instanceof Error, `point ${n}: the untake run again completes${again instanceof Error ? `: ${again.message}` : ''}`);
    if (again instanceof Error) continue;
    const states = Object.fromEntries(again.after!.report.resources.map((r) => [r.key, r.state]));
    t.same([states[`file:${A}`], states[`file:${B}`]], ['held', 'held'], `point ${n}: held again, not changed`);
    t.same(readFileSync(join(m.root, A)), A_BYTES, `point ${n}: byte for byte`);
    t.same(readFileSync(join(m.root, B)), B_BYTES);
    t.equal(statSync(join(m.root, A)).mode & 0o7777, 0o640, `point ${n}: its mode`);
    const s = new SqliteHostStore(m.state);
    t.equal(await s.getValue(UNTAKE_KEY), null, `point ${n}: no untake left under way`);
    t.same(await s.listOwned(), [], `point ${n}: nothing of the module is the host's own`);
    await s.close();
  }
});

t.test("killed at each boundary of an untake the controller asked, the agent's next reconcile completes it and says so", async (t) => {
  const h0 = hostOn(copyBase('agent-preview'));
  const previewId = (await untake(h0, decl(true), 'web', { preview: true })).plan.id;
  await h0.close();
  const agentRun = (m: { root: string; state: string }, killAt: number) =>
    spawnSync(process.execPath, [SCRIPT, m.root, m.state, declFile, 'web', String(killAt), previewId], { encoding: 'utf8' });
  const first = agentRun(copyBase('agent-whole'), 0);
  if (first.status !== 0) throw new Error(first.stderr);
  const { points: agentPoints, outcomes } = JSON.parse(first.stdout) as { points: number; outcomes: { result: string }[] };
  t.match(outcomes, [{ module: 'web', previewId, result: 'done' }], 'unkilled: done');
  const wire = { ...declarationToWire(decl(false) as Declaration), untakes: [{ module: 'web', previewId }] };
  for (let n = 1; n <= agentPoints; n++) {
    const m = copyBase(`agent-kill-${n}`);
    const killed = agentRun(m, n);
    if (killed.signal !== 'SIGKILL') continue; // a point past the untake's own calls (the outcome's record)
    const h = hostOn(m);
    const again = await untakesAsked(h, declarationFromWire(wire), wire);
    await h.close();
    t.match(again.outcomes, [{ module: 'web', previewId, result: 'done' }], `point ${n}: the restart completes it, and says so`);
    t.same(readFileSync(join(m.root, A)), A_BYTES, `point ${n}: byte for byte`);
    t.same(readFileSync(join(m.root, B)), B_BYTES);
    const s = new SqliteHostStore(m.state);
    t.equal(await s.getValue(UNTAKE_KEY), null, `point ${n}: no untake left under way`);
    t.match(await s.getValue(UNTAKES_KEY), { web: { previewId, result: 'done' } }, `point ${n}: its outcome kept, so it is not run again`);
    await s.close();
  }
});

/**
 * The host killed with SIGKILL at every boundary of an apply, and at timed points inside it, then
 * restarted: nothing recorded is lost, no held file is modified, and the end state is the one an
 * uninterrupted apply reaches.
 */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { LocalFileStore } from '@meshp/files-local';
import { PLUGIN_API_VERSION, type Plugin } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { Reconciler } from '@meshp/core/reconcile';
import { assertPrivate } from '../helpers/modes.js';

const SCRIPT = join(dirname(fileURLToPath(import.meta.url)), '../helpers/crash-apply.mjs');
const HELD = '/etc/web/web.conf';
const HELD_BYTES = Buffer.from([0x70, 0x72, 0x65, 0x00, 0xff, 0x0a, 0x64]); // odd bytes: kept byte for byte
const TAKEN = '/etc/db/db.conf';
const OLD = '/etc/old/old.conf';
const NEW = '/etc/web/extra.conf';

const decl = (modules: unknown[]) => ({ apiVersion: 'meshp/v1', node: 'n1', mode: 'adopted', settings: { ports: {} }, modules });
const A = decl([{ name: 'old', taken: false, files: [{ path: OLD, content: 'old\n' }] }]);
const B = decl([
  {
    name: 'web',
    taken: false,
    files: [
      { path: HELD, content: 'mesh web\n' },
      { path: NEW, content: 'extra\n', mode: '0600' },
    ],
  },
  { name: 'db', taken: true, files: [{ path: TAKEN, content: 'mesh db\n' }] },
]);

function run(root: string, state: string, declFile: string, killAt: number) {
  return spawnSync(process.execPath, [SCRIPT, root, state, declFile, String(killAt)], { encoding: 'utf8' });
}

const dir = mkdtempSync(join(tmpdir(), 'meshp-crash-'));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const base = join(dir, 'base');
const put = (root: string, p: string, content: string | Buffer) => {
  mkdirSync(dirname(join(root, p)), { recursive: true });
  writeFileSync(join(root, p), content);
};
writeFileSync(join(dir, 'a.json'), JSON.stringify(A));
writeFileSync(join(dir, 'b.json'), JSON.stringify(B));
put(join(base, 'root'), HELD, HELD_BYTES);
put(join(base, 'root'), TAKEN, 'predecessor db\n');
const first = run(join(base, 'root'), join(base, 'state'), join(dir, 'a.json'), 0);
if (first.status !== 0) throw new Error(first.stderr);

function copyBase(name: string): { root: string; state: string } {
  const d = join(dir, name);
  cpSync(base, d, { recursive: true });
  return { root: join(d, 'root'), state: join(d, 'state') };
}

/**
 * The restart: a fresh host on the killed one's root and state, in this process (what a new process
 * would do, without the cost of loading the host once more for each of the kill points).
 */
async function restart(m: { root: string; state: string }) {
  const plugin: Plugin = {
    name: 'restart',
    apiVersion: PLUGIN_API_VERSION,
    apply(host) {
      host.hooks.files.tapPromise('restart', async (o) => new LocalFileStore(o.root));
      host.hooks.state.tapPromise('restart', async (o) => new SqliteHostStore(o.stateDir));
    },
  };
  const host = new Host({ root: m.root, stateDir: m.state }).use(plugin);
  try {
    const result = await new Reconciler(host).reconcile(B);
    return result.report as { resources: { key: string; state: string }[] };
  } finally {
    await host.close();
  }
}

async function check(t: Subtest, m: { root: string; state: string }, label: string): Promise<void> {
  const report = await restart(m);
  const states = Object.fromEntries(report.resources.map((r) => [r.key, r.state]));
  t.equal(states[`file:${HELD}`], 'held', `${label}: the found file is held`);
  t.equal(states[`file:${TAKEN}`], 'owned', `${label}: the taken file is the host's`);
  t.ok(states[`file:${NEW}`] === 'owned' || states[`file:${NEW}`] === 'created', `${label}: the new file is the host's`);
  t.notOk(`file:${OLD}` in states, `${label}: the old file is gone from the report`);
  t.same(readFileSync(join(m.root, HELD)), HELD_BYTES, `${label}: the held file is byte for byte what it was`);
  t.equal(readFileSync(join(m.root, TAKEN), 'utf8'), 'mesh db\n');
  t.equal(readFileSync(join(m.root, NEW), 'utf8'), 'extra\n');
  t.notOk(existsSync(join(m.root, OLD)), `${label}: the host's own undeclared file is removed`);
  const store = new SqliteHostStore(m.state);
  assertPrivate(t, m.state); // issue 13: the state folder 0700, its database 0600
  const originals = new Map((await store.listOriginals()).map((o) => [o.key, Buffer.from(o.original)]));
  await store.close();
  t.same(originals.get(`file:${HELD}`), HELD_BYTES, `${label}: the held original is recorded`);
  t.equal(originals.get(`file:${TAKEN}`)?.toString(), 'predecessor db\n', `${label}: the taken file's original is kept`);
}

const w = copyBase('whole');
const whole = run(w.root, w.state, join(dir, 'b.json'), 0);
const points = JSON.parse(whole.stdout).points as number;

t.test(`killed at each of the ${points} boundaries of an apply, then restarted`, async (t) => {
  t.ok(points >= 10, `an apply has ${points} kill points`);
  for (let n = 1; n <= points; n++) {
    const m = copyBase(`kill-${n}`);
    const killed = run(m.root, m.state, join(dir, 'b.json'), n);
    t.equal(killed.signal, 'SIGKILL', `point ${n}: killed`);
    t.same(readFileSync(join(m.root, HELD)), HELD_BYTES, `point ${n}: the held file untouched at the kill`);
    await check(t, m, `point ${n}`);
    rmSync(dirname(m.root), { recursive: true, force: true });
  }
});

t.test('killed at timed points inside an apply, then restarted', async (t) => {
  for (const ms of [5, 20, 40, 60, 80, 100, 130, 160]) {
    const m = copyBase(`timed-${ms}`);
    const child = spawn(process.execPath, [SCRIPT, m.root, m.state, join(dir, 'b.json'), '0'], { stdio: 'ignore' });
    await new Promise((r) => setTimeout(r, ms));
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    t.same(readFileSync(join(m.root, HELD)), HELD_BYTES, `${ms} ms: the held file untouched at the kill`);
    await check(t, m, `${ms} ms`);
    rmSync(dirname(m.root), { recursive: true, force: true });
  }
});

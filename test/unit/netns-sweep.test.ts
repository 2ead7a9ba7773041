/**
 * A lab's namespaces and what runs in them go with the file that made them: at teardown, and when
 * the file is stopped by a signal before any teardown runs (Ctrl-C to the runner). wireguard-go and
 * dockerd are detached (their own session), so a signal to the file's group misses them: they were
 * left behind, with their namespaces, before this (seen after a Ctrl-C to a lab run).
 */
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createInterface } from 'node:readline';
import t from 'tap';
import { netns, runPrefix, sh } from '../helpers/netns.js';
import { Deadline } from '../helpers/budget.js';

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function gone(pid: number, ms = 10_000): Promise<boolean> {
  const d = new Deadline(ms);
  while (alive(pid) && !d.expired()) await new Promise((r) => setTimeout(r, 50));
  return !alive(pid);
}

t.test('teardown: a process the test left in its namespace is ended by pid, then the namespace deleted', async (t) => {
  const name = runPrefix('nsw');
  let pid = 0;
  await t.test('a test that leaves a detached process in its namespace', async (tt) => {
    const ns = await netns(tt, name);
    const [cmd, args] = ns.wrap('sleep', ['600']);
    const child = spawn(cmd, args, { detached: true, stdio: 'ignore' });
    child.unref();
    pid = child.pid!;
    t.teardown(() => {
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    });
    tt.ok(alive(pid), 'running in the namespace');
  });
  t.ok(await gone(pid), 'ended with the namespace');
  t.notOk(existsSync(`/var/run/netns/${name}`), 'and the namespace deleted');
});

for (const sig of ['SIGINT', 'SIGTERM'] as const)
  t.test(`${sig} before any teardown: the file's namespaces and what runs in them are swept before it goes`, async (t) => {
    const name = runPrefix('nss');
    // A plain node with the TypeScript loader, not the runner's own imports (its process-info hook waits on the runner).
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('TAP') && !k.startsWith('_TAPJS')));
    const loader = new URL('../../node_modules/@tapjs/typescript/dist/esm/import.mjs', import.meta.url).href;
    const child = new URL('../helpers/netns-sweep-child.ts', import.meta.url).pathname;
    const file = spawn(process.execPath, [`--import=${loader}`, child, name], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...env, TS_NODE_PROJECT: 'tsconfig.tap.json' },
    });
    let pid = 0;
    t.teardown(async () => {
      if (file.exitCode === null) file.kill('SIGKILL');
      if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
      await sh('ip', ['netns', 'del', name]).catch(() => undefined);
    });
    const first = await new Promise<string>((resolve, reject) => {
      createInterface({ input: file.stdout }).once('line', resolve);
      file.once('exit', (code) => reject(new Error(`the child ended first (${code})`)));
    });
    pid = (JSON.parse(first) as { pid: number }).pid;
    t.ok(alive(pid), 'the detached process runs');
    t.ok(existsSync(`/var/run/netns/${name}`), 'in a namespace of the file');
    const exited = new Promise<NodeJS.Signals | null>((r) => file.once('exit', (_c, s) => r(s)));
    file.kill(sig);
    t.equal(await exited, sig, `the file still ends by ${sig}, as if it had not been caught`);
    t.ok(await gone(pid), 'the detached process is gone with it');
    t.notOk(existsSync(`/var/run/netns/${name}`), 'and the namespace deleted');
  });

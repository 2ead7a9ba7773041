/**
 * Case 3 of issue 13 with a real controller and a real agent on 127.0.0.1: a FIFO at a declared
 * path does not hang the agent. The apply completes with the file refused, the node acks (gap 0),
 * and SIGTERM stops the agent, with no one ever writing to the FIFO.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createToken, meshp, meshpJson, nodeList, startAgent, startController, waitUntil, workdir, writeJson } from '../helpers/grpc-procs.js';

const FIFO = '/etc/web/web.conf';

t.test('a FIFO at a declared path: refused, acked, and SIGTERM still stops the agent', async (t) => {
  const dir = workdir(t, 'fifo');
  const ctl = await startController(t, join(dir, 'ctl'));
  const admin = (...args: string[]) => {
    const r = meshp(...args, '--state', ctl.state, '--controller', ctl.address);
    t.equal(r.code, 0, `meshp ${args.join(' ')}: ${r.err}`);
  };
  admin('catalogue', 'add', writeJson(dir, 'web.json', { modules: [{ name: 'web', files: [{ path: FIFO, content: 'mesh\n' }] }] }), '--yes');
  // The FIFO is made before the agent starts: its root is its own folder (helpers/grpc-procs.ts).
  const rootOf = join(dir, 'a1', 'root');
  mkdirSync(join(rootOf, 'etc/web'), { recursive: true });
  t.equal(spawnSync('mkfifo', [join(rootOf, FIFO)]).status, 0);
  const agent = startAgent(t, dir, 'a1', ctl.address, createToken(ctl, '--adopted'));
  await agent.proc.waitFor((l) => l.msg === 'applied' && l.snapshot === true, 60_000); // a busy machine starts an agent slowly
  admin('module', 'assign', 'a1', 'web', '--yes');
  await waitUntil('the node acked the assignment', () => {
    const [n] = nodeList(ctl);
    return n && n.gap === 0 && n.appliedVersion === n.stateVersion && n.appliedVersion > 1;
  });
  const show = await waitUntil('the agent reported the refusal', () => {
    const s = meshpJson<{ resources: { key: string; state: string; reason?: string }[] }>('node', 'show', 'a1', '--state', ctl.state, '--controller', ctl.address);
    return s.resources.some((x) => x.key === `file:${FIFO}`) && s;
  });
  const r = show.resources.find((x) => x.key === `file:${FIFO}`);
  t.equal(r?.state, 'refused', JSON.stringify(show).slice(0, 400));
  t.match(r?.reason, /^MESHP_FILE_NOT_REGULAR: .* is a FIFO/);
  t.ok(lstatSync(join(rootOf, FIFO)).isFIFO(), 'the FIFO is left as it was');

  const before = Date.now();
  agent.proc.kill('SIGTERM');
  const code = await Promise.race([agent.proc.exited, new Promise<string>((r) => setTimeout(() => r('still running'), 30_000))]);
  t.not(code, 'still running', 'SIGTERM stopped the agent without anyone writing to the FIFO');
  t.comment(`stopped ${Date.now() - before} ms after SIGTERM, exit ${String(code)}`);
});

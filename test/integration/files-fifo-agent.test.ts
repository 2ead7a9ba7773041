/**
 * Case 3 of issue 13 with a real controller and a real agent on 127.0.0.1: a FIFO at a declared
 * path does not hang the agent. The apply completes with the file refused, the node acks (gap 0),
 * and SIGTERM stops the agent, with no one ever writing to the FIFO.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { lstatSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createToken, meshp, meshpJson, startAgent, startController, waitUntil, workdir, writeJson } from '../helpers/grpc-procs.js';

const FIFO = '/etc/web/web.conf';

t.test('a FIFO at a declared path: refused, acked, and SIGTERM still stops the agent', async (t) => {
  const dir = workdir(t, 'fifo');
  const t0 = Date.now();
  const phase = (what: string) => t.comment(`${what}: ${Date.now() - t0} ms`);
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
  phase('controller up, catalogue added');
  const agent = startAgent(t, dir, 'a1', ctl.address, createToken(ctl, '--adopted'));
  // Assigned as soon as the node is enrolled; the agent's own log says when it has reconciled with
  // the file refused (no polling through CLI processes, each a node start on a busy machine).
  await agent.proc.waitFor((l) => l.msg === 'enrolled' || l.msg === 'starting', 60_000); // a busy machine starts an agent slowly
  phase('agent enrolled');
  admin('module', 'assign', 'a1', 'web', '--yes');
  phase('assigned');
  await agent.proc.waitFor((l) => l.msg === 'reconciled' && ((l.counts as { refused?: number } | undefined)?.refused ?? 0) >= 1, 60_000);
  phase('agent reconciled');
  type Show = { node: { gap: number; appliedVersion: number; stateVersion: number }; resources: { key: string; state: string; reason?: string }[] };
  // The agent acks and reports right after that line: one `node show` normally sees both.
  const show = await waitUntil('the node acked the assignment and reported the refusal', () => {
    const s = meshpJson<Show>('node', 'show', 'a1', '--state', ctl.state, '--controller', ctl.address);
    return s.resources.some((x) => x.key === `file:${FIFO}`) && s.node.gap === 0 && s;
  });
  phase('node show saw it');
  t.equal(show.node.appliedVersion, show.node.stateVersion, 'acked: gap 0');
  t.ok(show.node.appliedVersion > 1, 'the assignment was applied');
  const r = show.resources.find((x) => x.key === `file:${FIFO}`);
  t.equal(r?.state, 'refused', JSON.stringify(show).slice(0, 400));
  t.match(r?.reason, /^MESHP_FILE_NOT_REGULAR: .* is a FIFO/);
  t.ok(lstatSync(join(rootOf, FIFO)).isFIFO(), 'the FIFO is left as it was');

  const before = Date.now();
  agent.proc.kill('SIGTERM');
  let timer: NodeJS.Timeout | undefined;
  const code = await Promise.race([agent.proc.exited, new Promise<string>((r) => (timer = setTimeout(() => r('still running'), 30_000)))]);
  clearTimeout(timer); // a pending 30 s timer would hold the test file open after its last assertion
  t.not(code, 'still running', 'SIGTERM stopped the agent without anyone writing to the FIFO');
  t.comment(`stopped ${Date.now() - before} ms after SIGTERM, exit ${String(code)}`);
  const said = agent.proc.lines.find((l) => l.msg === 'stopped');
  t.comment(`the agent logged 'stopped' ${said ? `${Number(said.time) - before} ms` : 'never'} after SIGTERM`);
});

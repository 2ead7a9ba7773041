/**
 * examples/agent as its README says: an agent assembled from chosen plugins enrols with a token,
 * reconciles without a refusal, and follows the controller. Controller, CLI and agent all run inside
 * one namespace of the test's own, so the agent's nftables plugin probes an empty ruleset, and its
 * root '/' is written to by nothing (no module is assigned).
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { labAvailable, netns, runPrefix, type Netns } from '../helpers/netns.js';
import { MESHP, Proc, waitUntil, workdir } from '../helpers/grpc-procs.js';

const EXAMPLE = join(process.cwd(), 'examples/agent/dist/main.js');

function cli(ns: Netns, ...args: string[]): unknown {
  const [cmd, argv] = ns.wrap(process.execPath, [MESHP, ...args, '--json']);
  const r = spawnSync(cmd, argv, { encoding: 'utf8', timeout: 30_000 });
  if (r.status !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.status}: ${r.stderr}`);
  return JSON.parse(r.stdout) as unknown;
}

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('the example agent enrols, reconciles with no refusal, and stops on SIGTERM', async (t) => {
    const dir = workdir(t, 'example-agent');
    const ns = await netns(t, runPrefix('exa'));
    const ctlState = join(dir, 'ctl');
    const ctl = new Proc(t, ['controller', 'serve', '--state', ctlState, '--listen', '127.0.0.1:0'], ns);
    const address = String((await ctl.waitFor((l) => l.msg === 'controller serving')).address);
    const { token } = cli(ns, 'token', 'create', '--state', ctlState, '--controller', address) as { token: string };

    const [cmd, argv] = ns.wrap(process.execPath, [EXAMPLE, join(dir, 'agent'), address, token]);
    const { spawn } = await import('node:child_process');
    const agent = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    t.teardown(() => {
      if (agent.exitCode === null && agent.signalCode === null) process.kill(agent.pid!, 'SIGKILL');
    });
    let out = '';
    agent.stdout.on('data', (d: Buffer) => (out += d.toString()));
    agent.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => agent.once('exit', (code) => resolve(code)));

    await waitUntil('the example agent reconciles', () => out.includes('reconciled'), 60_000);
    t.notMatch(out, /MESHP_PROVIDER_MISSING/, 'every part the agent needs is provided');
    t.notMatch(out, /reconcile refused/, 'no reconcile was refused');
    const nodes = await waitUntil(
      'the node reports',
      () => {
        const list = (cli(ns, 'node', 'list', '--state', ctlState, '--controller', address) as { nodes: { name: string; gap: number; firewall: string }[] })
          .nodes;
        return list.length === 1 && list[0]!.gap === 0 && list;
      },
      30_000,
    );
    t.equal(nodes[0]!.gap, 0, 'the node follows the controller');
    process.kill(agent.pid!, 'SIGTERM');
    t.equal(await exited, 0, 'it stops cleanly');
  });
}

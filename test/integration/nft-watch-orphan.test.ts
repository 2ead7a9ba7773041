/**
 * The firewall watch's `nft -j monitor` ends with the agent, also when the agent is killed with
 * SIGKILL (no handler runs: before, the monitor went on as an orphan of init, one per killed agent,
 * 18 of them after a run of the suite). A process of its own starts the watch in a namespace made
 * here, says the monitor's pid, and is killed.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';
import { until } from '../helpers/budget.js';

const alive = (pid: number) => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else if (!existsSync('/usr/bin/setpriv')) t.fail('setpriv (util-linux) is not on this machine: the monitor cannot be tied to its agent');
else
  t.test("a killed agent's ruleset monitor ends with it", async (t) => {
    const name = `${runPrefix('nwo')}n`;
    await netns(t, name);
    const script = `
      import { NftablesDriver, localRunner, localSpawner, netnsPrefix } from '@meshp/firewall-nftables';
      const p = netnsPrefix(${JSON.stringify(name)});
      const d = new NftablesDriver({ runner: localRunner(p), spawner: localSpawner(p), root: '/nonexistent', configFile: '/etc/nftables.conf' });
      const w = d.watch(() => {});
      console.log(JSON.stringify({ monitor: w.pid }));
      setInterval(() => {}, 1000);`;
    const agent = spawn(process.execPath, ['--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    t.teardown(() => {
      if (agent.exitCode === null) agent.kill('SIGKILL');
    });
    const monitor = await new Promise<number>((resolve, reject) => {
      agent.stdout!.once('data', (d: Buffer) => resolve((JSON.parse(d.toString()) as { monitor: number }).monitor));
      agent.once('exit', (code) => reject(new Error(`the watching process exited (${code})`)));
    });
    t.teardown(() => {
      if (alive(monitor)) process.kill(monitor, 'SIGKILL');
    });
    await until(
      'the monitor runs',
      () => alive(monitor) && readFileSync(`/proc/${monitor}/cmdline`, 'utf8').split('\0').join(' ').includes('nft -j monitor'),
      20,
      100,
    );
    t.pass(`the monitor runs as nft itself (pid ${monitor})`);
    agent.kill('SIGKILL');
    await until('the monitor gone with its agent', () => !alive(monitor), 20, 100);
    t.pass('killed with SIGKILL, the agent took its monitor with it');
  });

import t from 'tap';
import type { Opening } from '@meshp/core';
import { IptablesDriver, IptablesPlugin, nsenterRunner, type IptablesWatcher } from '@meshp/firewall-iptables';
import { labAvailable, netns, runPrefix, type Netns } from '../helpers/netns.js';
import { RULES_V4, RULES_V6, tool, type Backend } from '../helpers/ipt-lab.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `cond` until true or `ms` pass. */
async function within(ms: number, cond: () => boolean): Promise<boolean> {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(50)) if (cond()) return true;
  return cond();
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const web: Opening = { id: 'web/incoming/tcp/9090', module: 'web', port: 9090, protocol: 'tcp', from: ['10.71.1.0/24'], path: 'incoming', action: 'accept' };

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  for (const backend of ['nft', 'legacy'] as Backend[]) {
    t.test(`${backend}: a reload calls back, our own changes do not, close() stops it`, async (t) => {
      const ns: Netns = await netns(t, `${runPrefix('iq')}w`);
      const reload = async () => {
        await ns.exec(tool(backend, 4, 'restore'), [], RULES_V4);
        await ns.exec(tool(backend, 6, 'restore'), [], RULES_V6);
      };
      await reload();
      const runner = nsenterRunner(ns.path);
      // Legacy polls; a short interval keeps the test quick (the default is 2 s).
      const driver = new IptablesDriver(backend, { runner, root: '/nonexistent', watch: { intervalMs: 300 } });
      const other = new IptablesPlugin({ runner, backends: [backend] }).driver(backend, '/nonexistent');
      let calls = 0;
      const w = driver.watch(() => calls++) as IptablesWatcher;
      t.teardown(() => w.close());
      await w.ready;
      const pid = w.pid;
      if (backend === 'nft') t.ok(pid, 'iptables-nft is watched through nft monitor');
      else t.equal(pid, undefined, 'iptables-legacy is read on a timer');

      t.same(await other.ensure([web], []), { added: [web.id], removed: [] }, 'our own opening, written by another driver of the same plugin');
      t.same(await driver.ensure([], []), { added: [], removed: [web.id] }, 'and removed by this one');
      await other.ensure([web], []);
      await sleep(1200);
      t.equal(calls, 0, 'our own changes are not news');

      await reload();
      t.ok(await within(4000, () => calls >= 1), 'the reload (which lost our rule) calls back within seconds');
      await sleep(800);
      const n = calls;
      t.ok(n <= 2, `at most once per family's transaction (${n})`);

      await ns.exec(tool(backend, 4, 'restore'), ['--noflush'], '*filter\n-I INPUT 1 -p tcp --dport 7 -j ACCEPT\nCOMMIT\n');
      t.ok(await within(4000, () => calls === n + 1), 'a rule of someone else calls back');

      w.close();
      if (pid) t.ok(await within(2000, () => !alive(pid)), 'the monitor is gone after close()');
      await reload();
      await sleep(1200);
      t.equal(calls, n + 1, 'no callback after close()');
    });
  }
}

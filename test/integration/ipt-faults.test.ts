import t from 'tap';
import { MeshpError } from '@meshp/core';
import { IptablesDriver, nsenterRunner, type CommandRunner } from '@meshp/firewall-iptables';
import { labAvailable, netns, runPrefix, type Teardownable } from '../helpers/netns.js';
import { RULES_V4, tool } from '../helpers/ipt-lab.js';
import { opening } from '../helpers/ipt-scenarios.js';

const V6 = '*filter\n:INPUT DROP [0:0]\n-A INPUT -i lo -j ACCEPT\nCOMMIT\n';

async function bed(tt: Teardownable) {
  const ns = await netns(tt, `${runPrefix('iq')}f`);
  await ns.exec(tool('legacy', 4, 'restore'), [], RULES_V4);
  await ns.exec(tool('legacy', 6, 'restore'), [], V6);
  const save = async () => (await ns.exec('iptables-legacy-save', [])).stdout.replace(/^#.*\n/gm, '').replace(/\[\d+:\d+\]/g, '');
  const save6 = async () => (await ns.exec('ip6tables-legacy-save', [])).stdout.replace(/^#.*\n/gm, '').replace(/\[\d+:\d+\]/g, '');
  return { ns, save, save6, real: nsenterRunner(ns.path) };
}

const wanted = [opening({ port: 9090, path: 'incoming' })];

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('a failing IPv6 restore leaves IPv4 as it was: the IPv4 transaction is undone', async (t) => {
    const { save, save6, real } = await bed(t);
    const before = await save();
    const before6 = await save6();
    const calls: string[] = [];
    const runner: CommandRunner = async (cmd, args, input) => {
      calls.push(cmd);
      if (cmd === 'ip6tables-legacy-restore') return { stdout: '', stderr: 'injected failure', code: 1 };
      return real(cmd, args, input);
    };
    const fw = new IptablesDriver('legacy', { runner, root: '/nonexistent' });
    const err = await fw.ensure(wanted, []).catch((e: unknown) => e);
    t.ok(err instanceof MeshpError);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_FAILED');
    t.match((err as MeshpError).message, /injected failure/);
    t.equal(calls.filter((c) => c === 'iptables-legacy-restore').length, 2, 'applied, then undone');
    t.equal(await save(), before, 'IPv4 unchanged');
    t.equal(await save6(), before6, 'IPv6 unchanged');
  });

  t.test('a restore the kernel refuses changes nothing (one transaction per table)', async (t) => {
    const { save, real } = await bed(t);
    const before = await save();
    // The second line of the transaction names a chain that does not exist.
    const runner: CommandRunner = (cmd, args, input) =>
      real(cmd, args, cmd.includes('restore') && input ? input.replace('COMMIT', '-A NO-SUCH-CHAIN -j ACCEPT\nCOMMIT') : input);
    const fw = new IptablesDriver('legacy', { runner, root: '/nonexistent' });
    const err = await fw.ensure(wanted, []).catch((e: unknown) => e);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_FAILED');
    t.equal(await save(), before);
  });

  t.test('unreadable save output is MESHP_FIREWALL_OUTPUT and nothing is written', async (t) => {
    const { save, real } = await bed(t);
    const before = await save();
    const writes: string[] = [];
    const runner: CommandRunner = async (cmd, args, input) => {
      if (cmd.endsWith('-save')) return { stdout: '*filter\n:INPUT DROP [0:0]\n-A INPUT -j DROP\n', stderr: '', code: 0 };
      if (cmd.endsWith('-restore')) writes.push(cmd);
      return real(cmd, args, input);
    };
    const fw = new IptablesDriver('legacy', { runner, root: '/nonexistent' });
    const err = await fw.ensure(wanted, []).catch((e: unknown) => e);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_OUTPUT');
    t.same(writes, []);
    t.equal(await save(), before);
  });

  t.test('a missing binary is MESHP_FIREWALL_TOOL_MISSING', async (t) => {
    const { real } = await bed(t);
    const runner: CommandRunner = (cmd, args, input) => real(cmd === 'iptables-legacy-save' ? 'iptables-legacy-save-not-installed' : cmd, args, input);
    const fw = new IptablesDriver('legacy', { runner, root: '/nonexistent' });
    const err = await fw.openings().catch((e: unknown) => e);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_TOOL_MISSING');
  });

  t.test('an opening with a bad range fails before anything is written', async (t) => {
    const { save, real } = await bed(t);
    const before = await save();
    const fw = new IptablesDriver('legacy', { runner: real, root: '/nonexistent' });
    const err = await fw.ensure([opening({ port: 9090, path: 'incoming', from: ['10.0.0.0/33'] })], []).catch((e: unknown) => e);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_FAILED');
    t.equal(await save(), before);
  });
}

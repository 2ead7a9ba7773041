import t from 'tap';
import { spawn } from 'node:child_process';
import { copyFile, mkdir, mkdtemp, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { NftablesPlugin, type NftablesDriver } from '@meshp/firewall-nftables';
import { labAvailable, netns, runPrefix, type Netns } from '../helpers/netns.js';
import { reaper } from '../helpers/ipt-lab.js';
import { lab } from '../helpers/nft-lab.js';

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('a found nftables table that drops is the active kind, its config file named', async (t) => {
    const l = await lab(t);
    const host = new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name }));
    const driver = (await host.firewall()) as NftablesDriver;
    t.equal(driver.kind, 'nftables');
    const [seen] = host.firewallSightings();
    t.match(seen, { kind: 'nftables', active: true, by: 'firewall-nftables' });
    t.match(seen!.summary, /inet filter/);
    const d = await driver.describe();
    t.equal(d.configFile, l.configFile);
    t.same(d.tables, ['inet filter']);
    t.ok(d.active);
    t.match(d.summary.join('\n'), /input \(hook input, policy drop/);
  });

  t.test('a firewalld table is seen as firewalld, without a driver, and adoption is refused naming it', async (t) => {
    const l = await lab(t);
    await l.load(
      'table inet firewalld {\n chain filter_INPUT {\n  type filter hook input priority filter + 10; policy accept;\n  reject with icmpx admin-prohibited\n }\n}\n',
    );
    const before = await l.nft(['-j', 'list', 'ruleset']);
    const host = new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name }));
    const err = await host.firewall().catch((e: unknown) => e);
    t.ok(err instanceof MeshpError);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_UNKNOWN');
    t.match((err as MeshpError).message, /firewalld \(firewalld owns nftables table inet firewalld\)/);
    const seen = (err as MeshpError).details?.seen as { kind: string; by: string }[];
    t.same(
      seen.map((s) => s.kind),
      ['firewalld'],
      'firewalld named, without a driver',
    );
    const asked = new Host({ root: l.root, firewall: 'nftables' }).use(new NftablesPlugin({ netns: l.server.name }));
    await t.rejects(
      asked.firewall(),
      { code: 'MESHP_FIREWALL_UNKNOWN', message: /managed by firewalld/ },
      'the nftables kind offers no driver beside it, even asked for by name',
    );
    t.equal(await l.nft(['-j', 'list', 'ruleset']), before, 'nothing written');
  });

  t.test('iptables-nft tables are left to the iptables kind and not counted', async (t) => {
    const ns = await netns(t, `${runPrefix('nq')}i`);
    await ns.exec('iptables-nft', ['-P', 'INPUT', 'DROP']);
    await ns.exec('iptables-nft', ['-A', 'INPUT', '-p', 'tcp', '--dport', '22', '-m', 'comment', '--comment', 'ssh', '-j', 'ACCEPT']);
    const host = new Host({ root: '/nonexistent-root' }).use(new NftablesPlugin({ netns: ns.name }));
    const driver = await host.firewall();
    t.equal(driver?.kind, 'none', 'nothing of ours here: no sighting, no firewall');
    t.same(host.firewallSightings(), []);
  });

  t.test('a table present but dropping nothing is idle; an empty namespace has no firewall', async (t) => {
    const l = await lab(t);
    await rm(l.configFile);
    await l.nft(['flush', 'ruleset']);
    const empty = new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name }));
    t.equal((await empty.firewall())?.kind, 'none');
    await l.load('table ip nat {\n chain postrouting {\n  type nat hook postrouting priority srcnat;\n  oifname "x" masquerade\n }\n}\n');
    const idle = new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name }));
    t.equal((await idle.firewall())?.kind, 'nftables');
    t.match(idle.firewallSightings(), [{ kind: 'nftables', active: false }]);
  });

  t.test("a daemon named firewalld counts only in the node's own namespace; Proxmox VE's enabled config is a manager", async (t) => {
    const l = await lab(t);
    const make = () => new Host({ root: l.root }).use(new NftablesPlugin({ netns: l.server.name }));
    await symlink('/proc', join(l.root, 'proc'));
    const bin = await mkdtemp(join(tmpdir(), 'fwd-'));
    t.teardown(() => rm(bin, { recursive: true, force: true }));
    await mkdir(join(bin, 'usr/sbin'), { recursive: true });
    await copyFile('/bin/sleep', join(bin, 'usr/sbin/firewalld'));
    const start = async (ns: Netns | null) => {
      const [cmd, args] = ns ? ns.wrap(join(bin, 'usr/sbin/firewalld'), ['300']) : [join(bin, 'usr/sbin/firewalld'), ['300']];
      const child = spawn(cmd, args, { stdio: 'ignore' });
      reaper(t).push(child);
      for (let i = 0; i < 50 && !(await readFile(`/proc/${child.pid}/cmdline`, 'utf8').catch(() => '')).includes('firewalld'); i++)
        await new Promise((r) => setTimeout(r, 20));
      return child;
    };
    const other = await netns(t, `${runPrefix('nd')}o`);
    await start(other);
    await start(null);
    t.equal((await make().firewall())?.kind, 'nftables', 'daemons in other namespaces: the found firewall is offered');
    const mine = await start(l.server);
    await t.rejects(
      make().firewall(),
      { code: 'MESHP_FIREWALL_UNKNOWN', message: new RegExp(`firewalld .*process ${mine.pid} `) },
      "one in the node's namespace: refused",
    );
    process.kill(mine.pid!, 'SIGKILL');
    await new Promise((r) => mine.once('exit', r));

    await mkdir(join(l.root, 'etc/pve/firewall'), { recursive: true });
    await writeFile(join(l.root, 'etc/pve/firewall/100.fw'), '[OPTIONS]\nenable: 1\n');
    await t.rejects(
      make().firewall(),
      { code: 'MESHP_FIREWALL_UNKNOWN', message: /pve-firewall .*etc\/pve\/firewall\/100\.fw enable: 1/ },
      'pve-firewall named',
    );
  });
}

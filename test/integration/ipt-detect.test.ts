import t, { type Test } from 'tap';
import { MeshpError } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { IptablesPlugin, nsenterRunner } from '@meshp/firewall-iptables';
import { labAvailable, netns, runPrefix, type Netns, type Teardownable } from '../helpers/netns.js';
import { reaper, RULES_V4, tool, type Backend } from '../helpers/ipt-lab.js';
import { fixture } from '../helpers/corpus.js';
import { spawn } from 'node:child_process';
import { copyFile, mkdtemp, mkdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

async function machine(tt: Teardownable, rules: Partial<Record<Backend, string>> = {}) {
  const ns = await netns(tt, `${runPrefix('iq')}d`);
  const root = await mkdtemp(join(tmpdir(), 'ipd-'));
  tt.teardown(() => rm(root, { recursive: true, force: true }));
  for (const [backend, text] of Object.entries(rules) as [Backend, string][]) {
    await ns.exec(tool(backend, 4, 'restore'), [], text);
  }
  if (rules.legacy) {
    await mkdir(join(root, 'etc/iptables'), { recursive: true });
    await writeFile(join(root, 'etc/iptables/rules.v4'), rules.legacy);
  }
  const makeHost = (requested = 'auto') => new Host({ root, firewall: requested }).use(new IptablesPlugin({ runner: nsenterRunner(ns.path) }));
  return { ns, root, makeHost };
}

const legacyNames = async (ns: Netns) => (await ns.exec('cat', ['/proc/net/ip_tables_names'])).stdout.trim();

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('a legacy firewall is found through /proc and answered by the iptables-legacy driver', async (t) => {
    const { makeHost, root } = await machine(t, { legacy: RULES_V4 });
    const host = makeHost();
    const fw = await host.firewall();
    t.equal(fw?.kind, 'iptables-legacy');
    const seen = host.firewallSightings();
    t.match(seen, [{ kind: 'iptables-legacy', active: true, by: 'firewall-iptables' }]);
    t.notOk(
      seen.some((s) => s.kind === 'iptables-nft'),
      'the empty nft backend is not reported',
    );
    const d = await fw!.describe();
    t.equal(d.configFile, join(root, 'etc/iptables/rules.v4'));
    t.equal(d.manager, 'netfilter-persistent');
    t.ok(d.active);
    t.ok(d.tables.includes('ip filter'));
  });

  t.test('an nft-backend firewall is found and answered by the iptables-nft driver', async (t) => {
    const { makeHost, ns } = await machine(t, { nft: RULES_V4 });
    const host = makeHost();
    const fw = await host.firewall();
    t.equal(fw?.kind, 'iptables-nft');
    t.equal(await legacyNames(ns), '', 'looking created no legacy table');
  });

  t.test('a machine with nothing gives no active sighting and creates no table by looking', async (t) => {
    const { makeHost, ns } = await machine(t);
    const host = makeHost();
    const fw = await host.firewall();
    t.equal(fw?.kind, 'none');
    t.notOk(host.firewallSightings().some((s) => s.active));
    t.equal(await legacyNames(ns), '', 'no legacy table created');
    t.equal((await ns.exec('nft', ['list', 'tables'])).stdout.trim(), '', 'no nft table created');
  });

  t.test('asking for a kind on an empty machine gives its driver', async (t) => {
    const { makeHost } = await machine(t);
    t.equal((await makeHost('iptables-nft').firewall())?.kind, 'iptables-nft');
  });

  t.test('a legacy table that drops nothing is present but not active', async (t) => {
    const { makeHost } = await machine(t, { legacy: '*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n' });
    const host = makeHost();
    t.equal((await host.firewall())?.kind, 'iptables-legacy');
    t.match(host.firewallSightings(), [{ kind: 'iptables-legacy', active: false }]);
  });

  t.test('both backends active is refused, naming both', async (t) => {
    const { makeHost } = await machine(t, { legacy: RULES_V4, nft: RULES_V4 });
    const err = await makeHost()
      .firewall()
      .catch((e: unknown) => e);
    t.ok(err instanceof MeshpError);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_UNKNOWN');
    t.match((err as MeshpError).message, /iptables-legacy.*iptables-nft|iptables-nft.*iptables-legacy/);
  });

  t.test("ufw's chains are reported as kind ufw with no driver, so adoption is refused", async (t) => {
    const ufwish = '*filter\n:INPUT DROP [0:0]\n:ufw-user-input - [0:0]\n-A INPUT -j ufw-user-input\nCOMMIT\n';
    const { makeHost } = await machine(t, { nft: ufwish });
    const err = await makeHost()
      .firewall()
      .catch((e: unknown) => e);
    t.equal((err as MeshpError).code, 'MESHP_FIREWALL_UNKNOWN');
    t.match((err as MeshpError).message, /ufw/);
  });

  t.test('a manager enabled by its config under the root is refused on the backend holding the rules, even asked for by name', async (t) => {
    const { makeHost, root } = await machine(t, { nft: RULES_V4 });
    await mkdir(join(root, 'etc/firewalld'), { recursive: true });
    await writeFile(join(root, 'etc/firewalld/firewalld.conf'), 'FirewallBackend=iptables\n');
    await mkdir(join(root, 'etc/systemd/system/multi-user.target.wants'), { recursive: true });
    await writeFile(join(root, 'etc/systemd/system/multi-user.target.wants/firewalld.service'), '');
    await t.rejects(makeHost().firewall(), {
      code: 'MESHP_FIREWALL_UNKNOWN',
      message: /firewalld manages the firewall \(seen: etc\/firewalld\/firewalld\.conf/,
    });
    await t.rejects(makeHost('iptables-nft').firewall(), { code: 'MESHP_FIREWALL_UNKNOWN' });
    await mkdir(join(root, 'etc/csf'), { recursive: true });
    await writeFile(join(root, 'etc/csf/csf.conf'), 'TESTING = "0"\n');
    await t.rejects(makeHost().firewall(), { code: 'MESHP_FIREWALL_UNKNOWN', message: /csf/ });
  });

  /** A real process whose program is named `name` (a copy of sleep), started in `ns` (null: this process's own namespace). */
  const fakeDaemon = async (t: Test, name: string, ns: Netns | null) => {
    const bin = await mkdtemp(join(tmpdir(), 'fwd-'));
    t.teardown(() => rm(bin, { recursive: true, force: true }));
    await mkdir(join(bin, 'usr/sbin'), { recursive: true });
    await copyFile('/bin/sleep', join(bin, `usr/sbin/${name}`));
    const [cmd, args] = ns ? ns.wrap(join(bin, `usr/sbin/${name}`), ['300']) : [join(bin, `usr/sbin/${name}`), ['300']];
    const daemon = spawn(cmd, args, { stdio: 'ignore' });
    reaper(t).push(daemon);
    // nsenter execs the program (no fork for a network namespace): wait until the pid is the daemon.
    for (let i = 0; i < 50 && !(await readFile(`/proc/${daemon.pid}/cmdline`, 'utf8').catch(() => '')).includes(name); i++)
      await new Promise((r) => setTimeout(r, 20));
    return daemon;
  };

  t.test("a firewalld running now in the node's namespace is refused by its process, with no config and no chains of its own yet", async (t) => {
    const { makeHost, root, ns } = await machine(t, { nft: RULES_V4 });
    // The root's process table is this machine's; the daemon is a real process named firewalld, in the node's namespace.
    await symlink('/proc', join(root, 'proc'));
    const daemon = await fakeDaemon(t, 'firewalld', ns);
    await t.rejects(makeHost().firewall(), {
      code: 'MESHP_FIREWALL_UNKNOWN',
      message: new RegExp(`firewalld manages the firewall \\(seen: process ${daemon.pid} `),
    });
    await t.rejects(makeHost('iptables-nft').firewall(), { code: 'MESHP_FIREWALL_UNKNOWN' }, 'asked for by name: refused too');
    const gone = new Promise((r) => daemon.once('exit', r));
    process.kill(daemon.pid!, 'SIGKILL');
    await gone;
    t.equal((await makeHost().firewall())?.kind, 'iptables-nft', 'the daemon gone: the backend is offered again');
  });

  t.test("a firewalld in another namespace (a container's, another test's) does not refuse the node's firewall", async (t) => {
    const { makeHost, root } = await machine(t, { nft: RULES_V4 });
    await symlink('/proc', join(root, 'proc'));
    const other = await netns(t, `${runPrefix('iq')}o`);
    await fakeDaemon(t, 'firewalld', other);
    await fakeDaemon(t, 'firewalld', null);
    t.equal((await makeHost().firewall())?.kind, 'iptables-nft', "offered: the daemons rewrite their own namespaces, not the node's");
  });

  t.test("Proxmox VE's pve-firewall is a manager: by its PVEFW chains, its enabled config, its daemon", async (t) => {
    const byChains = await machine(t, { nft: fixture('pve-firewall.rules.v4').text });
    await t.rejects(
      byChains.makeHost().firewall(),
      { code: 'MESHP_FIREWALL_UNKNOWN', message: /pve-firewall manages the firewall \(seen: chain PVEFW-/ },
      'by its chains',
    );

    const byConfig = await machine(t, { nft: RULES_V4 });
    await mkdir(join(byConfig.root, 'etc/pve/firewall'), { recursive: true });
    await writeFile(join(byConfig.root, 'etc/pve/firewall/cluster.fw'), '[OPTIONS]\n\nenable: 0\n');
    t.equal((await byConfig.makeHost().firewall())?.kind, 'iptables-nft', 'cluster.fw with enable: 0 is not a manager');
    await writeFile(join(byConfig.root, 'etc/pve/firewall/cluster.fw'), '[OPTIONS]\n\nenable: 1\n\n[RULES]\n\nIN SSH(ACCEPT) -log nolog\n');
    await t.rejects(
      byConfig.makeHost().firewall(),
      { code: 'MESHP_FIREWALL_UNKNOWN', message: /pve-firewall .*etc\/pve\/firewall\/cluster\.fw enable: 1/ },
      'by its config',
    );

    const byDaemon = await machine(t, { nft: RULES_V4 });
    await symlink('/proc', join(byDaemon.root, 'proc'));
    const daemon = await fakeDaemon(t, 'pve-firewall', byDaemon.ns);
    await t.rejects(
      byDaemon.makeHost().firewall(),
      { code: 'MESHP_FIREWALL_UNKNOWN', message: new RegExp(`pve-firewall .*process ${daemon.pid} `) },
      'by its daemon',
    );
  });
}

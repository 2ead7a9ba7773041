/**
 * A router's forwarding as a found setting (issue 26, forwarding.ts), on a namespace's real sysctls:
 * recorded before anything touches it, said in the plan, never changed on an adopted node (held, a
 * warning), turned on for a converged router (or one whose routing module is taken) only by the plan's
 * action, and put back to the recorded value when the node stops routing, returns to adopted, or leaves.
 * A machine that takes its IPv6 default route from router advertisements (a real radvd in a
 * neighbour namespace) does not get IPv6 forwarding turned on while `accept_ra` is 1 there.
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Action, ApplyContext, Declaration, Mode, Plan } from '@meshp/core';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { FORWARDING_KEY, IPV4_FORWARD, IPV6_FORWARD, RouterForwarding, type Sysctl } from '../../../plugins/tunnel-wireguard/src/forwarding.js';
import { labAvailable, netns, runPrefix, wire, type Netns } from '../../helpers/netns.js';
import { until } from '../../helpers/budget.js';

const LAN = ['192.168.77.0/24'];

function nsSysctl(ns: Netns): Sysctl {
  return {
    read: async (name) => (await ns.exec('sysctl', ['-n', name]).catch(() => null))?.stdout.trim() ?? null,
    write: async (name, value) => void (await ns.exec('sysctl', ['-q', '-w', `${name}=${value}`])),
  };
}

/** The namespace's interfaces with a route learned from a router advertisement (the plugin's own reading, in `ns`). */
const nsRaLearned = (ns: Netns) => async () => [
  ...new Set((JSON.parse((await ns.exec('ip', ['-6', '-j', 'route', 'show', 'proto', 'ra'])).stdout || '[]') as { dev: string }[]).map((r) => r.dev)),
];

function planOf(mode: Mode, routingTaken?: boolean): { plan: Plan; ctx: ApplyContext } {
  const plan: Plan = { node: 'r1', mode, actions: [], firewall: { openings: [], refusals: [], kind: null } };
  const modules = routingTaken === undefined ? [] : [{ name: 'routing', taken: routingTaken, files: [], containers: [], openings: [] }];
  const declaration = { node: 'r1', mode, modules, settings: {} } as unknown as Declaration;
  return { plan, ctx: { declaration, plan, preview: false } };
}

/** The actions as the reconciler runs them: each one's own step. */
async function runAll(actions: Action[]): Promise<void> {
  for (const a of actions) await a.run?.();
}

const warnings: string[] = [];
const log = { warn: (_f: Record<string, unknown>, m: string) => void warnings.push(m), info() {} };

t.test(
  'a router forwarding is found, held on an adopted node, turned on converged and put back as found',
  { skip: labAvailable() ? false : 'needs root for namespaces' },
  async (t) => {
    const ns = await netns(t, `${runPrefix('router')}fw`);
    const dir = mkdtempSync(join(tmpdir(), 'router-fwd-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const store = new SqliteHostStore(dir);
    const sysctl = nsSysctl(ns);
    const f = new RouterForwarding(sysctl, log, nsRaLearned(ns));
    const v4 = () => sysctl.read(IPV4_FORWARD);
    t.equal(await v4(), '0', "a new namespace's forwarding is off");

    // Not a router: nothing said, nothing done.
    t.same(await f.actions(planOf('converged').plan, planOf('converged').ctx, store, []), [], 'not a router: nothing');
    t.same(await f.actions(planOf('converged').plan, planOf('converged').ctx, store, null), [], 'the view not known yet: nothing');

    // Adopted: held, warned, never changed.
    const adopted = planOf('adopted');
    const held = await f.actions(adopted.plan, adopted.ctx, store, LAN);
    t.same(
      held.map((a) => [a.key, a.op, a.state, !!a.run]),
      [[`file:/proc/sys/net/ipv4/ip_forward`, 'hold', 'held', false]],
    );
    t.match(held[0]!.reason, /found net\.ipv4\.ip_forward=0 on an adopted node: held.*forwards nothing to 192\.168\.77\.0\/24/);
    t.equal(f.status.state, 'held');
    t.equal(warnings.length, 1, 'warned once');
    await f.actions(adopted.plan, adopted.ctx, store, LAN);
    t.equal(warnings.length, 1, 'not again for the same setting');
    t.equal(await v4(), '0', 'unchanged on an adopted node');
    t.equal(await store.getValue(FORWARDING_KEY), null, 'nothing recorded: nothing changed');

    // Converged: the plan says it first; only the action's run records the original, then turns it on.
    const conv = planOf('converged');
    const preview = await f.actions(conv.plan, { ...conv.ctx, preview: true }, store, LAN);
    t.same(
      preview.map((a) => [a.op, a.state]),
      [['converge', 'owned']],
    );
    t.match(preview[0]!.reason, /found net\.ipv4\.ip_forward=0: recorded, then turned on/);
    t.equal(f.status.state, 'held', 'a preview says nothing of the node as it is');
    t.equal(await v4(), '0', 'planned, not done');
    await runAll(await f.actions(conv.plan, conv.ctx, store, LAN));
    t.equal(await v4(), '1', 'turned on by the action');
    t.match(await store.getValue(FORWARDING_KEY), { original: { [IPV4_FORWARD]: '0' }, wrote: { [IPV4_FORWARD]: '1' } }, 'its original recorded');
    const again = await f.actions(conv.plan, conv.ctx, store, LAN);
    t.same(
      again.map((a) => [a.op, a.state]),
      [['keep', 'owned']],
    );
    t.equal(f.status.state, 'owned');
    t.same(f.status.needed, [IPV4_FORWARD], 'what its prefixes need, reported');
    t.same(f.status.original, { [IPV4_FORWARD]: '0' });

    // No longer a router: put back.
    const off = await f.actions(conv.plan, conv.ctx, store, []);
    t.same(
      off.map((a) => [a.op, a.state]),
      [['release', 'released']],
    );
    await runAll(off);
    t.equal(await v4(), '0', 'put back to 0 as found');
    t.equal(await store.getValue(FORWARDING_KEY), null, 'the record forgotten');

    // On again, then the return to adopted: put back, and held from then on.
    await runAll(await f.actions(conv.plan, conv.ctx, store, LAN));
    t.equal(await v4(), '1');
    const back = await f.actions(adopted.plan, adopted.ctx, store, LAN);
    t.same(
      back.map((a) => [a.op, a.state]),
      [['release', 'released']],
    );
    t.match(back[0]!.reason, /put back to 0 as found: the node is adopted again/);
    await runAll(back);
    t.equal(await v4(), '0', 'put back on the return to adopted');

    // The routing module taken on an adopted node: meshp may change it there too; then the node leaves.
    const taken = planOf('adopted', true);
    await runAll(await f.actions(taken.plan, taken.ctx, store, LAN));
    t.equal(await v4(), '1', 'turned on: the routing module is taken');
    t.match(await f.restore(store, true), /net\.ipv4\.ip_forward put back to 0 as found/, 'the leave preview says it');
    t.equal(await v4(), '1', 'a preview changes nothing');
    t.match(await f.restore(store, false), /put back to 0/);
    t.equal(await v4(), '0', 'put back when the node leaves');
    t.equal(await f.restore(store, false), null, 'nothing recorded: nothing to put back');

    // Found on: held as found, never recorded, never put back.
    await sysctl.write(IPV4_FORWARD, '1');
    const found = await f.actions(conv.plan, conv.ctx, store, LAN);
    t.same(
      found.map((a) => [a.op, a.state]),
      [['keep', 'held']],
    );
    t.equal(f.status.state, 'found-on');
    await runAll(await f.actions(conv.plan, conv.ctx, store, []));
    t.equal(await v4(), '1', 'found on, left on when the node stops routing');

    // Changed by someone else after meshp turned it on: left as they set it.
    await sysctl.write(IPV4_FORWARD, '0');
    await runAll(await f.actions(conv.plan, conv.ctx, store, LAN));
    t.equal(await v4(), '1');
    await sysctl.write(IPV4_FORWARD, '0');
    t.match(await f.restore(store, false), /net\.ipv4\.ip_forward left at 0 \(changed since meshp set it to 1\)/, "another's change is left alone");
    t.equal(await store.getValue(FORWARDING_KEY), null);

    // An IPv6 prefix needs IPv6 forwarding only.
    const v6 = await f.actions(conv.plan, conv.ctx, store, ['fd77::/64']);
    t.same(
      v6.map((a) => a.key),
      ['file:/proc/sys/net/ipv6/conf/all/forwarding'],
    );
    await runAll(v6);
    t.equal(await sysctl.read(IPV6_FORWARD), '1');
    t.equal(await v4(), '0', 'IPv4 untouched');
    await f.restore(store, false);
    t.equal(await sysctl.read(IPV6_FORWARD), '0', 'IPv6 put back');
  },
);

const radvdMissing = (): string | false => (existsSync('/usr/sbin/radvd') ? false : 'needs radvd (the Makefile installs it)');

t.test(
  'IPv6 forwarding is not turned on where it would stop the router advertisements a default route came from',
  { skip: labAvailable() ? radvdMissing() : 'needs root for namespaces' },
  async (t) => {
    const r = await netns(t, `${runPrefix('router')}ra`);
    const lan = await netns(t, `${runPrefix('router')}rl`);
    await wire(r, '10.77.9.1/24', lan, '10.77.9.2/24', `${runPrefix('rv')}`.slice(0, 12));
    const dev = (await r.exec('ip', ['-o', 'link', 'show', 'type', 'veth'])).stdout.split(':')[1]!.trim().split('@')[0]!;
    const lanDev = (await lan.exec('ip', ['-o', 'link', 'show', 'type', 'veth'])).stdout.split(':')[1]!.trim().split('@')[0]!;
    const dir = mkdtempSync(join(tmpdir(), 'router-ra-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    // The LAN's router: radvd advertising a prefix and itself as the default router (documentation prefix, namespaces only).
    await lan.exec('sysctl', ['-q', '-w', 'net.ipv6.conf.all.forwarding=1']);
    writeFileSync(
      join(dir, 'radvd.conf'),
      `interface ${lanDev} { AdvSendAdvert on; MinRtrAdvInterval 3; MaxRtrAdvInterval 4; AdvDefaultLifetime 1800; prefix 2001:db8:77::/64 { AdvOnLink on; AdvAutonomous on; }; };\n`,
    );
    // The router-to-be takes its IPv6 address and default route by SLAAC, as a machine on such a LAN does.
    await r.exec('sysctl', ['-q', '-w', `net.ipv6.conf.${dev}.accept_ra=1`]);
    const [cmd, args] = lan.wrap('/usr/sbin/radvd', ['-n', '-C', join(dir, 'radvd.conf'), '-p', join(dir, 'radvd.pid'), '-m', 'stderr']);
    const radvd = spawn(cmd, args, { stdio: 'ignore' });
    t.teardown(() => void radvd.kill('SIGTERM'));
    const raRoutes = () => nsRaLearned(r)();
    await until('a default route learned from the advertisements', async () => (await raRoutes()).includes(dev), 60, 200);

    const store = new SqliteHostStore(dir);
    t.teardown(() => store.close());
    const sysctl = nsSysctl(r);
    const found = await sysctl.read(IPV6_FORWARD);
    const f = new RouterForwarding(sysctl, log, nsRaLearned(r));
    // Adopted: held as ever, and what the flip would turn on (the converge preview's `needed`) leaves IPv6 out, saying why.
    const adopted = planOf('adopted');
    const onAdopted = await f.actions(adopted.plan, adopted.ctx, store, ['0.0.0.0/0', '::/0']);
    t.match(
      onAdopted.find((a) => a.key === 'file:/proc/sys/net/ipv6/conf/all/forwarding')?.reason,
      /held, never changed here; net\.ipv6\.conf\.all\.forwarding not turned on: /,
    );
    t.same(f.status.needed, [IPV4_FORWARD], 'the flip would turn on ip_forward only');
    const conv = planOf('converged');
    const held = await f.actions(conv.plan, conv.ctx, store, ['0.0.0.0/0', '::/0']);
    const v6 = held.find((a) => a.key === 'file:/proc/sys/net/ipv6/conf/all/forwarding')!;
    t.same([v6.op, v6.state, v6.run], ['hold', 'held', undefined], 'IPv6 forwarding held: nothing to run');
    t.match(
      v6.reason,
      new RegExp(`not turned on: .*router advertisements ${dev} takes IPv6 routes from \\(accept_ra=1\\).*net\\.ipv6\\.conf\\.${dev}\\.accept_ra=2`),
    );
    t.match(
      f.status,
      { state: 'owned', reason: /turned on: net\.ipv4\.ip_forward; net\.ipv6\.conf\.all\.forwarding not turned on/ },
      'IPv4 turned on, IPv6 said held',
    );
    await runAll(held);
    t.same([await sysctl.read(IPV4_FORWARD), await sysctl.read(IPV6_FORWARD)], ['1', found], 'IPv4 on, IPv6 forwarding as found');
    t.ok((await raRoutes()).includes(dev), 'the default route from the advertisements is still there');
    t.ok(
      warnings.some((w) => /IPv6 forwarding not turned on/.test(w)),
      'the agent warns',
    );

    // The operator sets accept_ra 2 (advertisements taken while forwarding): then it is turned on, and the route stays.
    await r.exec('sysctl', ['-q', '-w', `net.ipv6.conf.${dev}.accept_ra=2`]);
    const on = await f.actions(conv.plan, conv.ctx, store, ['0.0.0.0/0', '::/0']);
    t.same(on.find((a) => a.key === 'file:/proc/sys/net/ipv6/conf/all/forwarding')?.op, 'converge', 'accept_ra 2: IPv6 forwarding turned on');
    await runAll(on);
    t.equal(await sysctl.read(IPV6_FORWARD), '1');
    await r.exec('ip', ['-6', 'route', 'flush', 'proto', 'ra']);
    t.notOk((await raRoutes()).includes(dev), 'the learned routes flushed');
    await until('the default route learned again, forwarding on', async () => (await raRoutes()).includes(dev), 60, 200);
    t.pass('advertisements still taken with forwarding on (accept_ra 2)');
    await f.restore(store, false);
    t.same([await sysctl.read(IPV4_FORWARD), await sysctl.read(IPV6_FORWARD)], ['0', found], 'both put back as found');
  },
);

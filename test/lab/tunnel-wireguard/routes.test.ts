/**
 * Route groups (issue 26), in the real mesh of mesh.test.ts: `meshp genesis` on the control-node,
 * four agents over the underlay with wireguard-go tunnels. a3 and a4 are the routers r1 and r2 of a
 * LAN namespace (192.168.77.0/24 on a bridge, a host serving TCP on LAN_PORT) that nothing else is
 * wired to. `meshp route set lan --via a3 --via a4`: a1, whose policy allows `route:lan`, reaches the
 * LAN host through a3's tunnel peer (the prefix in that peer's allowed IPs, a kernel route into the
 * interface); a2, whose policy does not, is told nothing and does not reach it, even with the route
 * added by hand, nor — once a rule lets it reach the routers themselves — with the LAN put in r1's
 * allowed IPs by hand: r1's tunnel forwards to the LAN only what a rule to `route:lan` allows. r1's agent and wireguard-go killed, a4 becomes primary and a1 reaches the LAN through
 * it (the time printed); r1 back, the prefix stays with a4 (no flap). The policy revoked, a1 loses the
 * route; the group removed, likewise.
 *
 * The routers are adopted: meshp never turns their forwarding on (ADR 0032). The test turns
 * net.ipv4.ip_forward on inside r1's namespace before the group, as the operator does, and leaves r2's
 * off: the route preview says r1's is found on and r2's held, r2's report holds it, and once the
 * operator turns it on the report follows. Its routers run no firewall plugin and have no `routing`
 * module taken, so the test masquerades in each router's namespace towards the LAN; meshp's own
 * forwarded path and masquerade are routes-found.test.ts's (ADR 0038).
 */
import t from 'tap';
import { Proc, workdir } from '../../helpers/grpc-procs.js';
import { labAvailable, netns, sh, type Netns } from '../../helpers/netns.js';
import { Deadline, fileBudget, until } from '../../helpers/budget.js';
import { alive } from './bed.js';
import { PORT, keyOf, meshAddress, meshBed, reaches, reachesSoon, wgPid, type Node } from './mesh-bed.js';

fileBudget(300);

const LAN_HOST = '192.168.77.2';
const LAN_PORT = 8080;
const LAN = '192.168.77.0/24';

/** The prefixes each peer of the node's interface carries: tunnel key → allowed IPs. */
async function allowedIps(n: Node): Promise<Map<string, string[]>> {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'allowed-ips']);
  return new Map(
    stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t') as [string, string])
      .map(([k, ips]) => [k, ips.split(' ').filter((x) => x && x !== '(none)')]),
  );
}

const routeTo = async (n: Node, prefix: string): Promise<string> => (await n.ns.exec('ip', ['route', 'show', prefix])).stdout.trim();
const carries = async (n: Node, via: Node): Promise<boolean> => (await allowedIps(n)).get(keyOf(via))?.includes(LAN) ?? false;

/** The router's link into the LAN bridge, its forwarding on and masquerade towards the LAN: what the operator does today. */
async function router(lan: Netns, r: Node, address: string, link: string, forward = true): Promise<void> {
  await sh('ip', ['link', 'add', `${link}a`, 'type', 'veth', 'peer', 'name', `${link}b`]);
  await sh('ip', ['link', 'set', `${link}a`, 'netns', r.ns.name]);
  await sh('ip', ['link', 'set', `${link}b`, 'netns', lan.name]);
  await lan.exec('ip', ['link', 'set', `${link}b`, 'master', 'br0', 'up']);
  await r.ns.exec('ip', ['addr', 'add', `${address}/24`, 'dev', `${link}a`]);
  await r.ns.exec('ip', ['link', 'set', `${link}a`, 'up']);
  if (forward) await sh('ip', ['netns', 'exec', r.ns.name, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
  await r.ns.exec('nft', ['-f', '-'], `table ip labnat {\n chain post { type nat hook postrouting priority 100; oifname "${link}a" masquerade; }\n}\n`);
}

t.test(
  'a node whose policy allows the route group reaches the LAN behind its routers over the tunnel, through the second when the first goes; one whose policy does not, does not',
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const dir = workdir(t, 'wgroutes');
    const b = await meshBed(t, dir, 4);
    const [a1, a2, r1, r2] = b.agents as [Node, Node, Node, Node];
    await b.policy([{ from: 'user', to: 'route:lan' }]);
    const tokens = await Promise.all(
      ['user', 'other', 'router', 'router'].map(async (tag) => (JSON.parse(await b.cli('token', 'create', '--tag', tag, '--json')) as { token: string }).token),
    );
    b.startAgent(b.c);
    b.agents.forEach((a, k) => b.startAgent(a, ['--token', tokens[k]!]));
    try {
      for (const n of [b.c, ...b.agents]) await n.proc!.waitFor((l) => l.msg === 'dns resolver answering', 90_000);
    } catch (e) {
      for (const n of [b.c, ...b.agents]) t.comment(`${n.name}: ${JSON.stringify(n.proc!.lines.filter((l) => l.msg !== 'reconciled').slice(-30))}`);
      throw e;
    }

    // The LAN: one host on a bridge, wired to the two routers only, serving TCP.
    const lan = await netns(t, `${b.prefix}lan`);
    await lan.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);
    await lan.exec('ip', ['addr', 'add', `${LAN_HOST}/24`, 'dev', 'br0']);
    await lan.exec('ip', ['link', 'set', 'br0', 'up']);
    await router(lan, r1, '192.168.77.1', `${b.prefix}l1`);
    await router(lan, r2, '192.168.77.3', `${b.prefix}l2`, false);
    new Proc(
      t,
      [`require('net').createServer((s) => { s.on('error', () => {}); s.end('lan\\n'); }).listen(${LAN_PORT}, '${LAN_HOST}');`],
      lan,
      '-e',
      process.execPath,
    );
    await until('the LAN host serving', () => reaches(r1.ns, LAN_HOST, LAN_PORT), 30, 100);
    t.notOk(await reaches(a1.ns, LAN_HOST, LAN_PORT), 'before the group, a1 does not reach the LAN');

    // The preview says each router's forwarding from its last report (its agent reads it every reconcile).
    type Previewed = { forwarding: { node: string; change: string }[] };
    const previewed = await until('both routers reported their forwarding', async () => {
      const p = JSON.parse(await b.cli('route', 'set', 'lan', '--prefix', LAN, '--via', 'a3', '--via', 'a4', '--preview', '--json')) as Previewed;
      return p.forwarding.every((f) => !/not reported/.test(f.change)) && /=1/.test(p.forwarding[0]?.change ?? '') ? p : null;
    });
    t.match(
      previewed.forwarding,
      [
        { node: 'a3', change: /^net\.ipv4\.ip_forward=1 found on: kept$/ },
        { node: 'a4', change: /^net\.ipv4\.ip_forward=0 on an adopted node: held, never changed/ },
      ],
      "the route preview says r1's forwarding is found on and r2's held",
    );
    const set = await b.cli('route', 'set', 'lan', '--prefix', LAN, '--via', 'a3', '--via', 'a4', '--yes', '--json');
    t.same((JSON.parse(set) as { changedNodes: string[] }).changedNodes, ['a1', 'a3', 'a4'], 'the user and the routers change, nobody else');
    t.ok(await reachesSoon(a1.ns, LAN_HOST, LAN_PORT, 20), 'a1 reaches the LAN host through r1');
    t.ok(await carries(a1, r1), "r1's peer on a1 carries the LAN in its allowed IPs");
    t.notOk(await carries(a1, r2), "r2's peer does not: one primary");
    t.match(await routeTo(a1, LAN), new RegExp(`^${LAN.replace(/[./]/g, '\\$&')} dev ${a1.ifname} proto 61`), 'a kernel route into the tunnel');

    // a2: no rule to route:lan. Not told of the group: no route, no router among its peers.
    t.equal(await routeTo(a2, LAN), '', 'a2 has no route to the LAN');
    t.notOk((await allowedIps(a2)).has(keyOf(r1)), 'r1 is not a peer of a2');
    t.notOk(await reaches(a2.ns, LAN_HOST, LAN_PORT), 'a2 does not reach the LAN host');
    await a2.ns.exec('ip', ['route', 'add', LAN, 'dev', a2.ifname]);
    t.notOk(await reaches(a2.ns, LAN_HOST, LAN_PORT), 'nor with the route added by hand: no peer of its tunnel carries the LAN');
    await a2.ns.exec('ip', ['route', 'del', LAN, 'dev', a2.ifname]);

    // a2 may reach the routers themselves (a rule to their tag), so r1 is its peer: it puts the LAN in
    // r1's allowed IPs by hand and routes it there. r1 forwards nothing from it: no rule to route:lan.
    await b.policy([
      { from: 'user', to: 'route:lan' },
      { from: 'other', to: 'router' },
    ]);
    await until('r1 a peer of a2', async () => (await allowedIps(a2)).has(keyOf(r1)), 20, 100);
    t.ok(await reachesSoon(a2.ns, await meshAddress(r1), PORT, 20), 'a2 reaches r1 itself, as its policy says');
    const r1Mesh = await meshAddress(r1);
    await a2.ns.exec('wg', ['set', a2.ifname, 'peer', keyOf(r1), 'allowed-ips', `${r1Mesh}/32,${LAN}`]);
    await a2.ns.exec('ip', ['route', 'add', LAN, 'dev', a2.ifname]);
    t.notOk(await reaches(a2.ns, LAN_HOST, LAN_PORT), 'r1 does not forward from a2 to the LAN, though a2 sends it there');
    t.ok(await reaches(a1.ns, LAN_HOST, LAN_PORT), 'while it does from a1');
    await a2.ns.exec('ip', ['route', 'del', LAN, 'dev', a2.ifname]);
    await b.policy([{ from: 'user', to: 'route:lan' }]);

    // r2, adopted, holds its forwarding off: said in its report, never changed; the operator turns it on and the report follows.
    type Shown = { resources?: { key: string; state: string; reason?: string }[] };
    const fwd = async (n: Node) =>
      ((JSON.parse(await b.cli('node', 'show', n.name, '--json')) as Shown).resources ?? []).find((x) => x.key === 'file:/proc/sys/net/ipv4/ip_forward');
    t.match(await until("r2's forwarding held in its report", async () => (await fwd(r2))?.state === 'held' && fwd(r2)), {
      state: 'held',
      reason: /found net\.ipv4\.ip_forward=0 on an adopted node: held/,
    });
    t.equal((await r2.ns.exec('sysctl', ['-n', 'net.ipv4.ip_forward'])).stdout.trim(), '0', 'r2 forwarding never changed by meshp');
    await r2.ns.exec('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
    await until("r2's report follows", async () => /=1: the router forwards/.test((await fwd(r2))?.reason ?? ''));

    type Listed = { groups: { name: string; primary: string; users: string[] }[] };
    const listed = async () => (JSON.parse(await b.cli('route', 'list', '--json')) as Listed).groups;
    t.match(await listed(), [{ name: 'lan', primary: 'a3', users: ['a1'] }]);

    // r1 goes: its agent and its tunnel killed. a1 reaches the LAN through r2.
    const lost = Date.now();
    r1.proc!.kill('SIGKILL');
    const pid = wgPid(r1);
    if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    // Counted in idle-machine time (budget.ts): a wall-clock bound fails a busy machine, not the failover.
    const clock = new Deadline(15_000);
    await until(
      'a1 reaches the LAN again',
      () => {
        clock.left();
        return reaches(a1.ns, LAN_HOST, LAN_PORT);
      },
      30,
      50,
    );
    const failover = Date.now() - lost;
    const idle = Math.round(15_000 - clock.left());
    t.comment(
      `failover: a1's traffic to the LAN flowed again ${failover} ms after r1 was killed, ${idle} ms of idle-machine time (goal: 5000 ms; bench/route-failover measures it)`,
    );
    t.ok(idle < 15_000, `traffic flows again through r2 within 15 s of idle-machine time (${failover} ms wall, ${idle} ms idle)`);
    t.ok(await carries(a1, r2), "r2's peer carries the LAN now");
    t.notOk(await carries(a1, r1), "and r1's no longer");
    t.match(await listed(), [{ name: 'lan', primary: 'a4' }]);

    // r1 back: its stream open again, the prefix stays with r2.
    b.startAgent(r1);
    // Its resolver answers once its stream is open and its view applied.
    await r1.proc!.waitFor((l) => l.msg === 'dns resolver answering', 60_000);
    t.match(await listed(), [{ name: 'lan', primary: 'a4' }], 'r1 back: r2 stays primary (no flap)');
    t.ok(await carries(a1, r2), "a1 still sends the LAN to r2's peer");
    t.ok(await reaches(a1.ns, LAN_HOST, LAN_PORT), 'and still reaches it');

    // The policy no longer allows it: a1's route goes, and with it the way to the LAN.
    await b.policy([{ from: 'other', to: 'user' }]);
    await until('a1 lost the route', async () => (await routeTo(a1, LAN)) === '', 20, 100);
    t.notOk(await reaches(a1.ns, LAN_HOST, LAN_PORT), 'a1, no longer allowed, does not reach the LAN');

    // Allowed again, then the group removed: the route goes with the group.
    await b.policy([{ from: 'user', to: 'route:lan' }]);
    t.ok(await reachesSoon(a1.ns, LAN_HOST, LAN_PORT, 20), 'allowed again, a1 reaches the LAN again');
    await b.cli('route', 'remove', 'lan', '--yes');
    await until('a1 lost the route with the group', async () => (await routeTo(a1, LAN)) === '', 20, 100);
    t.notOk(await reaches(a1.ns, LAN_HOST, LAN_PORT), 'the group removed, a1 does not reach the LAN');
  },
);

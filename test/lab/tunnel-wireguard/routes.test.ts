/**
 * Route groups (issue 26), in the real mesh of mesh.test.ts: `meshp genesis` on the control-node,
 * three agents over the underlay with wireguard-go tunnels. a3 is the router r1 of a LAN namespace
 * (192.168.77.0/24, a host serving TCP on LAN_PORT) that nothing else is wired to. `meshp route set`
 * declares the group; a1, whose policy allows `route:lan`, reaches the LAN host through a3's tunnel
 * peer (the prefix in that peer's allowed IPs, a kernel route into the interface); a2, whose policy
 * does not, is told nothing and does not reach it, even with the route added by hand. The policy
 * revoked, a1 loses the route; the group removed, the router's peers are what the policy gives.
 *
 * Not meshp's yet (README): the router's forwarding. The test turns net.ipv4.ip_forward on inside
 * a3's namespace and gives the LAN host a route back to the mesh's range through a3 (no masquerade).
 */
import t from 'tap';
import { Proc, workdir } from '../../helpers/grpc-procs.js';
import { labAvailable, netns, sh, wire } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { keyOf, meshBed, reaches, reachesSoon, type Node } from './mesh-bed.js';

fileBudget(240);

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

t.test(
  'a node whose policy allows the route group reaches the LAN behind its router over the tunnel; one whose policy does not, does not',
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const dir = workdir(t, 'wgroutes');
    const b = await meshBed(t, dir);
    const [a1, a2, r1] = b.agents as [Node, Node, Node];
    await b.policy([{ from: 'user', to: 'route:lan' }]);
    const tokens = await Promise.all(
      ['user', 'other', 'router'].map(async (tag) => (JSON.parse(await b.cli('token', 'create', '--tag', tag, '--json')) as { token: string }).token),
    );
    b.startAgent(b.c);
    b.agents.forEach((a, k) => b.startAgent(a, ['--token', tokens[k]!]));
    try {
      for (const n of [b.c, ...b.agents]) await n.proc!.waitFor((l) => l.msg === 'dns resolver answering', 90_000);
    } catch (e) {
      for (const n of [b.c, ...b.agents]) t.comment(`${n.name}: ${JSON.stringify(n.proc!.lines.filter((l) => l.msg !== 'reconciled').slice(-30))}`);
      throw e;
    }

    // The LAN: one host, wired to r1 only, serving TCP; its way back to the mesh's range is r1.
    const lan = await netns(t, `${b.prefix}lan`);
    await wire(r1.ns, '192.168.77.1/24', lan, `${LAN_HOST}/24`, `${b.prefix}l`);
    await lan.exec('ip', ['route', 'add', '100.96.0.0/16', 'via', '192.168.77.1']);
    await sh('ip', ['netns', 'exec', r1.ns.name, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
    new Proc(
      t,
      [`require('net').createServer((s) => { s.on('error', () => {}); s.end('lan\\n'); }).listen(${LAN_PORT}, '${LAN_HOST}');`],
      lan,
      '-e',
      process.execPath,
    );
    await until('the LAN host serving', () => reaches(r1.ns, LAN_HOST, LAN_PORT), 10, 100);
    t.notOk(await reaches(a1.ns, LAN_HOST, LAN_PORT), 'before the group, a1 does not reach the LAN');

    const set = await b.cli('route', 'set', 'lan', '--prefix', LAN, '--via', 'a3', '--yes', '--json');
    t.same((JSON.parse(set) as { changedNodes: string[] }).changedNodes, ['a1', 'a3'], 'the user and the router change, nobody else');
    t.ok(await reachesSoon(a1.ns, LAN_HOST, LAN_PORT, 20), 'a1 reaches the LAN host through r1');
    t.ok((await allowedIps(a1)).get(keyOf(r1))?.includes(LAN), "r1's peer on a1 carries the LAN in its allowed IPs");
    t.match(await routeTo(a1, LAN), new RegExp(`^${LAN.replace(/[./]/g, '\\$&')} dev ${a1.ifname} proto 61`), 'a kernel route into the tunnel');

    // a2: no rule to route:lan. Not told of the group: no route, no r1 among its peers.
    t.equal(await routeTo(a2, LAN), '', 'a2 has no route to the LAN');
    t.notOk((await allowedIps(a2)).has(keyOf(r1)), 'r1 is not a peer of a2');
    t.notOk(await reaches(a2.ns, LAN_HOST, LAN_PORT), 'a2 does not reach the LAN host');
    await a2.ns.exec('ip', ['route', 'add', LAN, 'dev', a2.ifname]);
    t.notOk(await reaches(a2.ns, LAN_HOST, LAN_PORT), 'nor with the route added by hand: no peer of its tunnel carries the LAN');
    await a2.ns.exec('ip', ['route', 'del', LAN, 'dev', a2.ifname]);

    const list = JSON.parse(await b.cli('route', 'list', '--json')) as { groups: { name: string; primary: string; users: string[] }[] };
    t.match(list.groups, [{ name: 'lan', primary: 'a3', users: ['a1'] }]);

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

/**
 * Exit nodes (issue 26, ADR 0039), in the real mesh of mesh.test.ts (namespaces `exn…`): `meshp
 * genesis`, three agents over wireguard-go. a3 is the exit node e, in front of an "internet"
 * namespace whose host (INET_HOST, outside every mesh and lab prefix) serves TCP; nothing else is
 * wired to it. `meshp route set out --exit --via a3`; the policy lets `user` (a1) use it, not `other`
 * (a2). a1 opts in by the admin's setting (`meshp node exit-node a1 out`) and reaches the internet
 * host through e, and still reaches the controller and a peer (a2) as before; a2 asks for the exit
 * node itself (`meshp agent --exit-node out`) and gets no exit route: the policy does not allow it.
 * a1 opts out (`--off`): its `ip rule` and `ip route show table all` are exactly as before, main
 * never touched, the device's fwmark off again.
 *
 * Not meshp's yet (README: another part of issue 26): the exit node's forwarded path and masquerade.
 * The test turns net.ipv4.ip_forward on in e's namespace and sets a masquerade rule there by hand,
 * as routes.test.ts does for its routers.
 */
import t from 'tap';
import { Proc, workdir } from '../../helpers/grpc-procs.js';
import { labAvailable, netns, sh } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { CONTROL_IP, PORT, meshAddress, meshBed, reaches, reachesSoon, type Node } from './mesh-bed.js';

fileBudget(300);

/** TEST-NET-3 (RFC 5737): no mesh, lab or machine prefix holds it. */
const INET_HOST = '203.0.113.7';
const INET_GW = '203.0.113.1';
const INET_PORT = 8443;
const EXIT_TABLE = '6161';

const rules = async (n: Node): Promise<string> => (await n.ns.exec('ip', ['rule', 'show'])).stdout + (await n.ns.exec('ip', ['-6', 'rule', 'show'])).stdout;
const routesAll = async (n: Node): Promise<string> =>
  (await n.ns.exec('ip', ['route', 'show', 'table', 'all'])).stdout + (await n.ns.exec('ip', ['-6', 'route', 'show', 'table', 'all'])).stdout;
const mainRoutes = async (n: Node): Promise<string> => (await n.ns.exec('ip', ['route', 'show', 'table', 'main'])).stdout;
const exitTable = async (n: Node): Promise<string> =>
  (await n.ns.exec('ip', ['route', 'show', 'table', EXIT_TABLE]).catch(() => ({ stdout: '' }))).stdout.trim();

t.test(
  'a node that opts in to an exit node the policy allows sends its default route through it and still reaches the mesh and the controller; one not allowed gets no exit route; opting out restores its routes exactly',
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const dir = workdir(t, 'wgexit');
    const b = await meshBed(t, dir, 3, 'exn');
    const [a1, a2, e] = b.agents as [Node, Node, Node];
    await b.policy([
      { from: 'user', to: 'route:out' },
      { from: 'user', to: 'other' },
    ]);
    const tokens = await Promise.all(
      ['user', 'other', 'exit'].map(async (tag) => (JSON.parse(await b.cli('token', 'create', '--tag', tag, '--json')) as { token: string }).token),
    );
    b.startAgent(b.c);
    // a2 asks for the exit node itself: its policy does not allow it.
    b.agents.forEach((a, k) => b.startAgent(a, ['--token', tokens[k]!, ...(a === a2 ? ['--exit-node', 'out'] : [])]));
    try {
      for (const n of [b.c, ...b.agents]) await n.proc!.waitFor((l) => l.msg === 'dns resolver answering', 90_000);
    } catch (err) {
      for (const n of [b.c, ...b.agents]) t.comment(`${n.name}: ${JSON.stringify(n.proc!.lines.filter((l) => l.msg !== 'reconciled').slice(-30))}`);
      throw err;
    }

    // The internet: a namespace wired to e only, its host serving TCP. e forwards and masquerades by hand (not meshp's yet).
    const inet = await netns(t, `${b.prefix}inet`);
    const link = `${b.prefix}i`;
    await sh('ip', ['link', 'add', `${link}a`, 'type', 'veth', 'peer', 'name', `${link}b`]);
    await sh('ip', ['link', 'set', `${link}a`, 'netns', e.ns.name]);
    await sh('ip', ['link', 'set', `${link}b`, 'netns', inet.name]);
    await e.ns.exec('ip', ['addr', 'add', `${INET_GW}/24`, 'dev', `${link}a`]);
    await e.ns.exec('ip', ['link', 'set', `${link}a`, 'up']);
    await inet.exec('ip', ['addr', 'add', `${INET_HOST}/24`, 'dev', `${link}b`]);
    await inet.exec('ip', ['link', 'set', `${link}b`, 'up']);
    await sh('ip', ['netns', 'exec', e.ns.name, 'sysctl', '-q', '-w', 'net.ipv4.ip_forward=1']);
    await e.ns.exec('nft', ['-f', '-'], `table ip labnat {\n chain post { type nat hook postrouting priority 100; oifname "${link}a" masquerade; }\n}\n`);
    new Proc(
      t,
      [`require('net').createServer((s) => { s.on('error', () => {}); s.end('internet\\n'); }).listen(${INET_PORT}, '${INET_HOST}');`],
      inet,
      '-e',
      process.execPath,
    );
    await until('the internet host serving', () => reaches(e.ns, INET_HOST, INET_PORT), 10, 100);
    const a2Mesh = await meshAddress(a2);
    t.ok(await reachesSoon(a1.ns, a2Mesh, PORT, 20), 'a1 reaches its peer a2 over the tunnel');
    t.notOk(await reaches(a1.ns, INET_HOST, INET_PORT), 'before the exit node, a1 does not reach the internet host');
    const rulesBefore = await rules(a1);
    const routesBefore = await routesAll(a1);
    const mainBefore = await mainRoutes(a1);

    // The exit node: a group of the default routes, through e.
    type Changed = { changedNodes: string[] };
    const previewed = JSON.parse(await b.cli('route', 'set', 'out', '--exit', '--via', 'a3', '--preview', '--json')) as Changed & {
      group: { prefixes: string[] };
    };
    t.same(previewed.group.prefixes, ['0.0.0.0/0', '::/0'], '--exit is the two default routes');
    t.same(previewed.changedNodes, ['a3'], 'nobody has opted in yet: only the exit node changes');
    await b.cli('route', 'set', 'out', '--exit', '--via', 'a3', '--yes');
    type Shown = { node: { exitNode: string | null; exitNodeReason: string | null; exitNodePrimary: string | null } };
    const shown = async (n: Node) => (JSON.parse(await b.cli('node', 'show', n.name, '--json')) as Shown).node;
    t.match(await shown(a2), { exitNode: null, exitNodeReason: 'not allowed' }, 'a2 asked for it, its policy does not allow it: node show says so');
    t.notOk(await reaches(a1.ns, INET_HOST, INET_PORT), 'a1 has not opted in: no exit route');

    const optIn = JSON.parse(await b.cli('node', 'exit-node', 'a1', 'out', '--preview', '--json')) as Changed & { exitNode: string };
    t.same(optIn.changedNodes, ['a1', 'a3'], 'the preview: a1 and its exit node change');
    t.equal(optIn.exitNode, 'out', 'and a1 would use out');
    t.equal(await rules(a1), rulesBefore, 'the preview changed nothing');
    await b.cli('node', 'exit-node', 'a1', 'out', '--yes');
    t.ok(await reachesSoon(a1.ns, INET_HOST, INET_PORT, 30), "a1 reaches the internet host's TCP port through e");
    t.match(await exitTable(a1), new RegExp(`^default dev ${a1.ifname} proto 61`), "the default route in the mesh's own table");
    const added = await rules(a1);
    t.match(added, /6161:\s+from all lookup main suppress_prefixlength 0/, "main's routes but its default first");
    t.match(added, new RegExp(`6162:\\s+not from all fwmark 0x1811 lookup ${EXIT_TABLE}`), 'the rest into the tunnel, but for its own packets');
    t.match(added, new RegExp(`6160:\\s+from all to ${CONTROL_IP.replace(/\./g, '\\.')} lookup main`), "the controller's address kept in main, ahead");
    t.equal(await mainRoutes(a1), mainBefore, 'the main table is never modified');
    t.equal((await a1.ns.exec('wg', ['show', a1.ifname, 'fwmark'])).stdout.trim(), '0x1811', 'the device marks its own packets');
    t.ok(await reaches(a1.ns, CONTROL_IP, 7443), 'a1 still reaches the controller');
    t.ok(await reaches(a1.ns, a2Mesh, PORT), 'and its peer a2 over the tunnel');
    t.match(await shown(a1), { exitNode: 'out', exitNodeReason: 'admin', exitNodePrimary: 'a3' }, 'node show says which exit node a1 uses');
    const doctor = JSON.parse(await b.cli('doctor', 'a1', '--json')) as { node: Shown['node'] };
    t.match(doctor.node, { exitNode: 'out', exitNodePrimary: 'a3' }, 'and doctor');

    // a2 asked, not allowed: no exit route, no rule, the internet not reached.
    t.equal(await exitTable(a2), '', 'a2 has no exit route');
    t.notMatch(await rules(a2), /lookup 6161/, 'nor a rule into the exit table');
    t.notOk(await reaches(a2.ns, INET_HOST, INET_PORT), 'a2 does not reach the internet host');

    // a1 opts out: its rules and routes as they were, exactly.
    await b.cli('node', 'exit-node', 'a1', '--off', '--yes');
    await until('a1 has no exit route', async () => (await exitTable(a1)) === '' && (await rules(a1)) === rulesBefore, 20, 100);
    t.equal(await rules(a1), rulesBefore, 'ip rule as before');
    t.equal(await routesAll(a1), routesBefore, 'ip route show table all as before');
    t.equal((await a1.ns.exec('wg', ['show', a1.ifname, 'fwmark'])).stdout.trim(), 'off', "the device's fwmark off again");
    t.notOk(await reaches(a1.ns, INET_HOST, INET_PORT), 'a1 no longer reaches the internet host');
    t.ok(await reaches(a1.ns, a2Mesh, PORT), 'and still reaches its peer');
    t.match(await shown(a1), { exitNode: null, exitNodeReason: 'off' });
  },
);

/**
 * Exit nodes (issue 26, ADR 0039), in the real mesh of mesh.test.ts (namespaces `exf…`): `meshp
 * genesis`, three agents over wireguard-go. a3 is the exit node e, in front of an "internet"
 * namespace whose host (INET_HOST, outside every mesh and lab prefix) serves TCP and answers with
 * the address it saw; nothing else is wired to it. `meshp route set out --exit --via a3`; the policy
 * lets `user` (a1) use it, not `other` (a2). a1 opts in by the admin's setting (`meshp node exit-node
 * a1 out`) and reaches the internet host through e, and still reaches the controller and a peer (a2)
 * as before; a2 asks for the exit node itself (`meshp agent --exit-node out`) and gets no exit route:
 * the policy does not allow it, and e forwards nothing from it even with the route and e's peer's
 * allowed IPs set by hand on a2. a1 opts out (`--off`): its `ip rule` and `ip route show table all`
 * are exactly as before, main never touched, the device's fwmark off again.
 *
 * The exit node's own side is meshp's (ADR 0038 for 0.0.0.0/0 and ::/0): e runs a found nftables
 * ruleset (input and forward policy drop, its own services allowed) and the nftables plugin, with
 * the `routing` module taken; nothing is set by hand there. meshp turns both forwarding sysctls on
 * (recorded), opens e's found forward chain to the default routes from what the policy allows
 * (marked rules), and masquerades toward them (meshp's own nat table): the internet host sees e's
 * address. At every step e's found ruleset differs only by marked rules; routing unassigned, the
 * marked rules go and both sysctls are back as found.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Proc, workdir, writeJson } from '../../helpers/grpc-procs.js';
import { labAvailable, netns, sh, type Netns } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { CONTROL_IP, PORT, keyOf, meshAddress, meshBed, reaches, reachesSoon, type Node } from './mesh-bed.js';
import { NFT_FOUND, nftAll, nftFound, reloadNft, unmarked } from './found-firewall.js';

fileBudget(360);

/** TEST-NET-3 (RFC 5737): no mesh, lab or machine prefix holds it. */
const INET_HOST = '203.0.113.7';
const INET_GW = '203.0.113.1';
const INET_NET = '203.0.113.0/24';
const INET_PORT = 8443;
const EXIT_TABLE = '6161';
const SYSCTLS = ['net.ipv4.ip_forward', 'net.ipv6.conf.all.forwarding'];

/** e's found firewall, as its operator loads it: its own services in, nothing forwarded. */

const rules = async (n: Node): Promise<string> => (await n.ns.exec('ip', ['rule', 'show'])).stdout + (await n.ns.exec('ip', ['-6', 'rule', 'show'])).stdout;
const routesAll = async (n: Node): Promise<string> =>
  (await n.ns.exec('ip', ['route', 'show', 'table', 'all'])).stdout + (await n.ns.exec('ip', ['-6', 'route', 'show', 'table', 'all'])).stdout;
const mainRoutes = async (n: Node): Promise<string> => (await n.ns.exec('ip', ['route', 'show', 'table', 'main'])).stdout;
const exitTable = async (n: Node): Promise<string> =>
  (await n.ns.exec('ip', ['route', 'show', 'table', EXIT_TABLE]).catch(() => ({ stdout: '' }))).stdout.trim();

const forwarding = async (n: Node) => Promise.all(SYSCTLS.map(async (k) => (await n.ns.exec('sysctl', ['-n', k])).stdout.trim()));

/** The first line the internet host answers (the address it saw), or '' when nothing came. */
const seenBy = async (from: Netns): Promise<string> =>
  from.exec('timeout', ['2', 'bash', '-c', `exec 3<>/dev/tcp/${INET_HOST}/${INET_PORT}; head -1 <&3`]).then(
    (r) => r.stdout.trim(),
    () => '',
  );

t.test(
  'a node that opts in to an exit node the policy allows sends its default route through it, masqueraded by the exit node in its found firewall, and still reaches the mesh and the controller; one not allowed gets nothing through it; opting out restores its routes exactly; routing unassigned, the exit node is as found',
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const dir = workdir(t, 'wgexit');
    const b = await meshBed(t, dir, 3, 'exf');
    const [a1, a2, e] = b.agents as [Node, Node, Node];
    // e's found firewall, loaded as its operator does, and its agent speaking it.
    const nftConf = join(dir, 'e-nftables.conf');
    writeFileSync(nftConf, NFT_FOUND);
    await e.ns.exec('nft', ['-f', nftConf]);
    const found = unmarked(await nftFound(e));
    const asFound = async (what: string) => t.equal(unmarked(await nftFound(e)), found, `${what}: e's found nftables differs only by marked rules`);
    e.args = e.args.map((x, i) => (e.args[i - 1] === '--firewall' ? 'nftables' : x));
    const forwardingFound = await forwarding(e);
    t.same(forwardingFound, ['0', '0'], "e's forwarding is off as found (a fresh namespace)");

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
    await asFound('adopted, before the exit node');

    // The internet: a namespace wired to e only, its host serving TCP and saying who connected. Nothing set by hand on e.
    const inet = await netns(t, `${b.prefix}inet`);
    const link = `${b.prefix}i`;
    await sh('ip', ['link', 'add', `${link}a`, 'type', 'veth', 'peer', 'name', `${link}b`]);
    await sh('ip', ['link', 'set', `${link}a`, 'netns', e.ns.name]);
    await sh('ip', ['link', 'set', `${link}b`, 'netns', inet.name]);
    await e.ns.exec('ip', ['addr', 'add', `${INET_GW}/24`, 'dev', `${link}a`]);
    await e.ns.exec('ip', ['link', 'set', `${link}a`, 'up']);
    await inet.exec('ip', ['addr', 'add', `${INET_HOST}/24`, 'dev', `${link}b`]);
    await inet.exec('ip', ['link', 'set', `${link}b`, 'up']);
    new Proc(
      t,
      [`require('net').createServer((s) => { s.on('error', () => {}); s.end(s.remoteAddress + '\\n'); }).listen(${INET_PORT}, '${INET_HOST}');`],
      inet,
      '-e',
      process.execPath,
    );
    await until('the internet host serving', async () => (await seenBy(e.ns)) === INET_GW, 30, 100);
    const a2Mesh = await meshAddress(a2);
    t.ok(await reachesSoon(a1.ns, a2Mesh, PORT, 20), 'a1 reaches its peer a2 over the tunnel');
    t.notOk(await reaches(a1.ns, INET_HOST, INET_PORT), 'before the exit node, a1 does not reach the internet host');
    const rulesBefore = await rules(a1);
    const routesBefore = await routesAll(a1);
    const mainBefore = await mainRoutes(a1);

    // The routing module taken on e: meshp may change its forwarding and forwarded path.
    await b.cli('catalogue', 'add', writeJson(dir, 'routing.json', { name: 'routing' }), '--yes');
    await b.cli('module', 'assign', e.name, 'routing', '--yes');
    await b.cli('module', 'take', e.name, 'routing', '--yes');
    t.same(await forwarding(e), forwardingFound, 'routing taken, e serving nothing yet: its forwarding unchanged');

    // The exit node: a group of the default routes, through e.
    type Changed = { changedNodes: string[] };
    const previewed = JSON.parse(await b.cli('route', 'set', 'out', '--exit', '--via', 'a3', '--preview', '--json')) as Changed & {
      group: { prefixes: string[] };
    };
    t.same(previewed.group.prefixes, ['0.0.0.0/0', '::/0'], '--exit is the two default routes');
    t.same(previewed.changedNodes, ['a3'], 'nobody has opted in yet: only the exit node changes');
    t.same(await forwarding(e), forwardingFound, 'the preview changed nothing on e');
    await b.cli('route', 'set', 'out', '--exit', '--via', 'a3', '--yes');
    // The mesh's addresses are IPv4 only: no peer can send IPv6 through the tunnel, so IPv6 forwarding is not needed and stays as found.
    const servedOn = ['1', forwardingFound[1]!];
    await until("e's forwarding turned on", async () => (await forwarding(e)).join() === servedOn.join(), 30, 100);
    t.pass('e serves 0.0.0.0/0 and ::/0: meshp turned ip_forward on (routing taken); IPv6 forwarding left as found, no peer has an IPv6 mesh address');
    // Nobody has opted in: e has no peer the group's rule lets through (a node not opted in is not sent the exit node, nor it the node).
    t.notMatch(await nftAll(e), /meshp:route|meshp_route/, 'nobody opted in: nothing forwarded, no marked rule, no masquerade');
    await asFound('routing taken, serving the exit node');
    type Shown = { node: { exitNode: string | null; exitNodeReason: string | null; exitNodePrimary: string | null } };
    const shown = async (n: Node) => (JSON.parse(await b.cli('node', 'show', n.name, '--json')) as Shown).node;
    t.match(await shown(a2), { exitNode: null, exitNodeReason: 'not allowed' }, 'a2 asked for it, its policy does not allow it: node show says so');
    t.notOk(await reaches(a1.ns, INET_HOST, INET_PORT), 'a1 has not opted in: no exit route');

    const optIn = JSON.parse(await b.cli('node', 'exit-node', 'a1', 'out', '--preview', '--json')) as Changed & { exitNode: string };
    t.same(optIn.changedNodes, ['a1', 'a3'], 'the preview: a1 and its exit node change');
    t.equal(optIn.exitNode, 'out', 'and a1 would use out');
    t.equal(await rules(a1), rulesBefore, 'the preview changed nothing');
    await b.cli('node', 'exit-node', 'a1', 'out', '--yes');
    // a1 is e's peer now: e opens its found forward chain to the default routes from a1, and masquerades it.
    await until("e's forward chain marked", async () => /comment "meshp:route\/out\//.test(await nftFound(e)), 30, 100);
    const a1Mesh = await meshAddress(a1);
    const fwd = await nftFound(e);
    t.match(
      fwd,
      new RegExp(`iifname "${e.ifname}" ip saddr ${a1Mesh.replace(/\./g, '\\.')} ip daddr 0\\.0\\.0\\.0/0 .*accept comment "meshp:route/out/`),
      "e's forward chain lets a1 (allowed) to 0.0.0.0/0",
    );
    t.notMatch(fwd, new RegExp(`saddr ${a2Mesh.replace(/\./g, '\\.')}\\b`), 'and names no rule for a2');
    t.match(
      await nftAll(e),
      new RegExp(`table inet meshp_route[\\s\\S]*oifname != "${e.ifname}" ip saddr ${a1Mesh.replace(/\./g, '\\.')} ip daddr 0\\.0\\.0\\.0/0 masquerade`),
      'e masquerades a1 toward 0.0.0.0/0, except back into the tunnel',
    );
    t.ok(await reachesSoon(a1.ns, INET_HOST, INET_PORT, 30), "a1 reaches the internet host's TCP port through e, nothing set by hand on e");
    t.equal(await seenBy(a1.ns), INET_GW, 'the internet host sees e: masqueraded');
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
    await asFound('a1 through e');

    // a2 asked, not allowed: no exit route, no rule, the internet not reached.
    t.equal(await exitTable(a2), '', 'a2 has no exit route');
    t.notMatch(await rules(a2), /lookup 6161/, 'nor a rule into the exit table');
    t.notOk(await reaches(a2.ns, INET_HOST, INET_PORT), 'a2 does not reach the internet host');
    // Nor with the route and e's peer's allowed IPs set by hand on a2: its packets reach e, which forwards nothing from a2.
    const eMesh = await meshAddress(e);
    await a2.ns.exec('ip', ['route', 'add', INET_NET, 'dev', a2.ifname]);
    await a2.ns.exec('wg', ['set', a2.ifname, 'peer', keyOf(e), 'allowed-ips', `${eMesh}/32,${INET_NET}`]);
    t.match((await a2.ns.exec('wg', ['show', a2.ifname, 'allowed-ips'])).stdout, INET_NET, "a2's tunnel sends the internet to e (by hand)");
    t.notOk(await reaches(a2.ns, INET_HOST, INET_PORT), 'a2 does not reach the internet host even so');
    await a2.ns.exec('wg', ['set', a2.ifname, 'peer', keyOf(e), 'allowed-ips', `${eMesh}/32`]);
    await a2.ns.exec('ip', ['route', 'del', INET_NET, 'dev', a2.ifname]);

    // e's operator reloads its firewall: the marked rules go, the agent puts them back.
    t.notMatch(await reloadNft(e, nftConf), /meshp:/, 'the reload wiped the marked rules (as its own nft run listed it)');
    await until('e marked again after the reload', async () => /meshp:route\/out\//.test(await nftFound(e)), 30, 100);
    t.ok(await reachesSoon(a1.ns, INET_HOST, INET_PORT, 20), 'a1 reaches the internet host again after the reload');
    await asFound("after the operator's reload");

    // a1 opts out: its rules and routes as they were, exactly.
    await b.cli('node', 'exit-node', 'a1', '--off', '--yes');
    await until('a1 has no exit route', async () => (await exitTable(a1)) === '' && (await rules(a1)) === rulesBefore, 20, 100);
    t.equal(await rules(a1), rulesBefore, 'ip rule as before');
    t.equal(await routesAll(a1), routesBefore, 'ip route show table all as before');
    t.equal((await a1.ns.exec('wg', ['show', a1.ifname, 'fwmark'])).stdout.trim(), 'off', "the device's fwmark off again");
    t.notOk(await reaches(a1.ns, INET_HOST, INET_PORT), 'a1 no longer reaches the internet host');
    t.ok(await reaches(a1.ns, a2Mesh, PORT), 'and still reaches its peer');
    t.match(await shown(a1), { exitNode: null, exitNodeReason: 'off' });
    // a1 is no longer e's peer: e forwards from nobody, its marked rules and masquerade go; it still serves the group, forwarding stays on.
    await until("e's marked rules gone after the opt-out", async () => !/meshp:route|meshp_route/.test(await nftAll(e)), 30, 100);
    t.pass('a1 opted out: the marked forward rules and the masquerade gone from e');
    t.same(await forwarding(e), servedOn, 'e still serves the exit node: its forwarding stays on');
    await asFound('a1 opted out');

    // a1 opts in again; then routing unassigned on e: the marked rules and meshp's nat table go, both sysctls back as found.
    await b.cli('node', 'exit-node', 'a1', 'out', '--yes');
    await until("e's forward chain marked again", async () => /meshp:route\/out\//.test(await nftFound(e)), 30, 100);
    t.ok(await reachesSoon(a1.ns, INET_HOST, INET_PORT, 30), 'a1 opted in again reaches the internet host');
    await b.cli('module', 'unassign', e.name, 'routing', '--yes');
    await until("e's marked rules gone", async () => !/meshp:route|meshp_route/.test(await nftAll(e)), 30, 100);
    await until("e's forwarding back as found", async () => (await forwarding(e)).join() === forwardingFound.join(), 30, 100);
    t.pass('routing unassigned: the marked forward rules and the masquerade gone, ip_forward back as found');
    t.equal(unmarked(await nftFound(e)), found, "e's found ruleset as its operator loaded it");
    t.notMatch(await nftFound(e), /meshp:route/, 'not one route rule left');
    t.notOk(await reaches(a1.ns, INET_HOST, INET_PORT), 'and a1, still opted in, no longer reaches the internet host through e');
  },
);

/**
 * A router's forwarded path in its found firewall (issue 26, ADR 0038), in the real mesh of
 * routes.test.ts: a3 (r1) runs a found nftables ruleset whose forward policy is drop, a4 (r2) a found
 * iptables one (FORWARD policy DROP), each allowing its own services; their agents run the matching
 * firewall plugin, with the `routing` module taken. No masquerade and no forwarding is set by hand:
 * meshp turns ip_forward on (recorded), opens the forwarded path from what the policy allows as
 * marked rules in the found forward chain, and masquerades the mesh sources toward the LAN in nat
 * postrouting. a1 (allowed) reaches the LAN host's port through r1; a2 (not allowed) does not, even
 * with the route added by hand. The operator reloads r1's firewall: the marked rules come back. r1
 * killed: a1 reaches the LAN through r2. `--no-masquerade`: the LAN host sees a1's mesh address.
 * Routing unassigned: the marked rules go and ip_forward is back as found. At every step the found
 * rulesets differ from what the operator loaded only by marked rules.
 */
import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Proc, workdir, writeJson } from '../../helpers/grpc-procs.js';
import { labAvailable, netns, sh, type Netns } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { alive } from './bed.js';
import { PORT, meshAddress, meshBed, reaches, reachesSoon, wgPid, type Node } from './mesh-bed.js';
import { NFT_FOUND, nftAll, nftFound, reloadNft, unmarked } from './found-firewall.js';

fileBudget(420);

const LAN_HOST = '192.168.77.2';
const LAN_PORT = 8080;
const LAN = '192.168.77.0/24';

const IPT_FOUND = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -i lo -j ACCEPT
-A INPUT -p tcp -m multiport --dports 22,${PORT} -j ACCEPT
COMMIT
`;

const iptFound = async (n: Node) => (await n.ns.exec('iptables-nft-save', ['-t', 'filter'])).stdout;
const iptNat = async (n: Node) => (await n.ns.exec('iptables-nft-save', ['-t', 'nat'])).stdout;
const forwarding = async (n: Node) => (await n.ns.exec('sysctl', ['-n', 'net.ipv4.ip_forward'])).stdout.trim();

/** The first line the LAN host answers (the address it saw), or '' when nothing came. */
const seenBy = async (from: Netns): Promise<string> =>
  from.exec('timeout', ['2', 'bash', '-c', `exec 3<>/dev/tcp/${LAN_HOST}/${LAN_PORT}; head -1 <&3`]).then(
    (r) => r.stdout.trim(),
    () => '',
  );
/** What the LAN host saw, asked until it answers (one ask's 2 s can run out on a loaded machine). */
const seenSoon = (from: Netns): Promise<string> => until('the LAN host answers', () => seenBy(from), 20, 100);

/** The router's link into the LAN bridge: nothing else (no forwarding, no masquerade: meshp's now). */
async function router(lan: Netns, r: Node, address: string, link: string): Promise<void> {
  await sh('ip', ['link', 'add', `${link}a`, 'type', 'veth', 'peer', 'name', `${link}b`]);
  await sh('ip', ['link', 'set', `${link}a`, 'netns', r.ns.name]);
  await sh('ip', ['link', 'set', `${link}b`, 'netns', lan.name]);
  await lan.exec('ip', ['link', 'set', `${link}b`, 'master', 'br0', 'up']);
  await r.ns.exec('ip', ['addr', 'add', `${address}/24`, 'dev', `${link}a`]);
  await r.ns.exec('ip', ['link', 'set', `${link}a`, 'up']);
}

t.test(
  "a router forwards to its LAN through its found firewall's own rules: marked, masqueraded, only what the policy allows, back after a reload, gone when it stops routing",
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const dir = workdir(t, 'rfwroutes');
    const b = await meshBed(t, dir, 4, 'rfw');
    const [a1, a2, r1, r2] = b.agents as [Node, Node, Node, Node];
    // The routers' found firewalls, loaded as their operators do, and their agents speaking them.
    const nftConf = join(dir, 'r1-nftables.conf');
    const iptConf = join(dir, 'r2-rules.v4');
    writeFileSync(nftConf, NFT_FOUND);
    writeFileSync(iptConf, IPT_FOUND);
    const reloadR1 = () => r1.ns.exec('nft', ['-f', nftConf]);
    const reloadR2 = () => r2.ns.exec('iptables-nft-restore', [iptConf]);
    await reloadR1();
    await reloadR2();
    const found1 = unmarked(await nftFound(r1));
    const found2 = unmarked(await iptFound(r2));
    const asFound = async (what: string) => {
      t.equal(unmarked(await nftFound(r1)), found1, `${what}: r1's found nftables differs only by marked rules`);
      t.equal(unmarked(await iptFound(r2)), found2, `${what}: r2's found iptables differs only by marked rules`);
    };
    const kind = (n: Node, k: string) => (n.args = n.args.map((x, i) => (n.args[i - 1] === '--firewall' ? k : x)));
    kind(r1, 'nftables');
    kind(r2, 'iptables-nft');

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
    await asFound('adopted, before any route');

    // The LAN: one host on a bridge, wired to the two routers only, with no route back to the mesh.
    const lan = await netns(t, `${b.prefix}lan`);
    await lan.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);
    await lan.exec('ip', ['addr', 'add', `${LAN_HOST}/24`, 'dev', 'br0']);
    await lan.exec('ip', ['link', 'set', 'br0', 'up']);
    await router(lan, r1, '192.168.77.1', `${b.prefix}l1`);
    await router(lan, r2, '192.168.77.3', `${b.prefix}l2`);
    new Proc(
      t,
      [`require('net').createServer((s) => { s.on('error', () => {}); s.end(s.remoteAddress + '\\n'); }).listen(${LAN_PORT}, '${LAN_HOST}');`],
      lan,
      '-e',
      process.execPath,
    );
    await until('the LAN host serving', async () => (await lan.exec('ss', ['-ltn'])).stdout.includes(`:${LAN_PORT}`), 30, 100);

    // The routing module taken on both routers: meshp may change their forwarding and forwarded path.
    await b.cli('catalogue', 'add', writeJson(dir, 'routing.json', { name: 'routing' }), '--yes');
    for (const r of [r1, r2]) {
      await b.cli('module', 'assign', r.name, 'routing', '--yes');
      await b.cli('module', 'take', r.name, 'routing', '--yes');
    }
    await b.cli('route', 'set', 'lan', '--prefix', LAN, '--via', r1.name, '--via', r2.name, '--yes');
    t.ok(await reachesSoon(a1.ns, LAN_HOST, LAN_PORT, 30), 'a1 reaches the LAN host through r1, no forwarding or masquerade set by hand');
    t.equal(await seenSoon(a1.ns), '192.168.77.1', 'the LAN host sees r1: masqueraded by default');
    t.equal(await forwarding(r1), '1', "r1's forwarding turned on by meshp (routing taken)");
    t.match(await nftFound(r1), /comment "meshp:route\/lan\//, "r1's forward chain holds marked route rules");
    t.match(await nftAll(r1), /masquerade/, "r1's masquerade stands in nat postrouting");
    await until("r2's marked rules in FORWARD", async () => /meshp:route\/lan\//.test(await iptFound(r2)));
    t.match(await iptNat(r2), /MASQUERADE/, "r2's masquerade in nat POSTROUTING");
    await asFound('routing');
    type Listed = { groups: { name: string; masquerade: boolean; primary: string }[] };
    const listed = async () => (JSON.parse(await b.cli('route', 'list', '--json')) as Listed).groups;
    t.match(await listed(), [{ name: 'lan', masquerade: true, primary: r1.name }], 'route list shows the masquerade');

    // a2: no rule to route:lan. Not even with the route added by hand.
    t.notOk(await reaches(a2.ns, LAN_HOST, LAN_PORT), 'a2 does not reach the LAN host');
    await a2.ns.exec('ip', ['route', 'add', LAN, 'dev', a2.ifname]);
    t.notOk(await reaches(a2.ns, LAN_HOST, LAN_PORT), 'nor with the route added by hand');
    await a2.ns.exec('ip', ['route', 'del', LAN, 'dev', a2.ifname]);

    // The operator reloads r1's firewall from their file: the marked rules are gone, the agent puts them back.
    t.notMatch(await reloadNft(r1, nftConf), /meshp:/, 'the reload wiped the marked rules (as its own nft run listed it)');
    await until('r1 marked again after the reload', async () => /meshp:route\/lan\//.test(await nftFound(r1)), 30, 100);
    t.ok(await reachesSoon(a1.ns, LAN_HOST, LAN_PORT, 20), 'a1 reaches the LAN again after the reload');
    await asFound("after the operator's reload");

    // r1 goes: its agent and its tunnel killed. a1 reaches the LAN through r2, whose iptables forwards it.
    r1.proc!.kill('SIGKILL');
    const pid = wgPid(r1);
    if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    await until('a1 reaches the LAN through r2', () => reaches(a1.ns, LAN_HOST, LAN_PORT), 40, 100);
    t.equal(await seenSoon(a1.ns), '192.168.77.3', 'through r2, masqueraded');
    await reloadR2();
    await until('r2 marked again after its reload', async () => /meshp:route\/lan\//.test(await iptFound(r2)), 30, 100);
    t.ok(await reachesSoon(a1.ns, LAN_HOST, LAN_PORT, 20), 'a1 reaches the LAN through r2 after r2 is reloaded');
    await asFound('after the failover and r2 reloaded');

    // Masquerade off: the LAN host (given a route back to a1 through r2) sees a1's mesh address.
    const a1Mesh = await meshAddress(a1);
    await lan.exec('ip', ['route', 'add', `${a1Mesh}/32`, 'via', '192.168.77.3']);
    await b.cli('route', 'set', 'lan', '--prefix', LAN, '--via', r1.name, '--via', r2.name, '--no-masquerade', '--yes');
    await until('the LAN host sees the mesh source', async () => (await seenBy(a1.ns)) === a1Mesh, 30, 100);
    t.pass(`--no-masquerade: the LAN host sees ${a1Mesh}`);
    t.notMatch(await iptNat(r2), /MASQUERADE/, "r2's masquerade is gone");
    t.match(await listed(), [{ name: 'lan', masquerade: false }], 'route list says masquerade off');

    // r1 back; then routing unassigned on both: the marked rules go, ip_forward back to 0 as found.
    b.startAgent(r1);
    await r1.proc!.waitFor((l) => l.msg === 'dns resolver answering', 60_000);
    for (const r of [r1, r2]) await b.cli('module', 'unassign', r.name, 'routing', '--yes');
    await until("r1's marked route rules gone", async () => !/meshp:route/.test(await nftAll(r1)) && !/meshp_route/.test(await nftAll(r1)), 30, 100);
    await until("r2's marked route rules gone", async () => !/meshp:route/.test((await iptFound(r2)) + (await iptNat(r2))), 30, 100);
    await until('ip_forward back on both', async () => (await forwarding(r1)) === '0' && (await forwarding(r2)) === '0', 30, 100);
    t.pass('routing unassigned: the marked forward and nat rules gone, ip_forward back to 0 on both routers');
    t.notOk(await reaches(a1.ns, LAN_HOST, LAN_PORT), 'and a1 no longer reaches the LAN');
    await asFound('routing unassigned');
  },
);

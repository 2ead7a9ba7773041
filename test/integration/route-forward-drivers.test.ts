/**
 * A router's forwarded path through each firewall driver (issue 26, ADR 0038), in namespaces: a
 * "mesh" side (two sources, 100.96.0.2 allowed and 100.96.0.3 not) wired to a router whose found
 * firewall drops forwarding, wired to a LAN host that has no route back to the mesh. `ensure` with
 * the route's forward opens what it allows in the found firewall's own terms (nftables: its forward
 * chain; iptables: FORWARD) and masquerades in nat postrouting; the found rules differ only by marked
 * ones, also after the operator reloads their file; without the forward every marked rule goes; with
 * masquerade off the LAN host sees the mesh address (given a route back). An exit node's forward
 * (0.0.0.0/0 and ::/0) loads in each, is read back as unchanged (iptables-save prints `-d 0.0.0.0/0`
 * as no `-d`), masquerades, and goes whole.
 */
import t from 'tap';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FirewallDriver, RouteForward } from '@meshp/core';
import { NftablesDriver, localRunner, localSpawner, netnsPrefix } from '@meshp/firewall-nftables';
import { IptablesDriver, nsenterRunner } from '@meshp/firewall-iptables';
import { labAvailable, netns, runPrefix, sh, wire, type Netns } from '../helpers/netns.js';
import { until } from '../helpers/budget.js';

const LAN = '192.168.77.0/24';
const LAN_HOST = '192.168.77.2';
const PORT = 8080;

const NFT_FOUND = `flush ruleset
table inet filter {
  chain input { type filter hook input priority filter; policy drop; ct state established,related accept; iif "lo" accept; tcp dport 22 accept; }
  chain forward { type filter hook forward priority filter; policy drop; ct state invalid drop; }
}
`;
const IPT_FOUND = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -i lo -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
COMMIT
`;

interface Bed {
  mesh: Netns;
  router: Netns;
  lan: Netns;
  iif: string;
  /** Who the LAN host says connected, or null: a TCP connection from `source`. */
  connect(source: string): Promise<string | null>;
}

async function bed(t: { teardown(fn: () => unknown): void }, tag = 'rfw'): Promise<Bed> {
  const p = runPrefix(tag);
  const mesh = await netns(t, `${p}m`);
  const router = await netns(t, `${p}r`);
  const lan = await netns(t, `${p}l`);
  await wire(router, '100.96.0.1/24', mesh, '100.96.0.2/24', `${p}t`);
  await mesh.exec('ip', ['addr', 'add', '100.96.0.3/24', 'dev', `${p}tb`]);
  await mesh.exec('ip', ['route', 'add', LAN, 'via', '100.96.0.1']);
  await wire(router, '192.168.77.1/24', lan, `${LAN_HOST}/24`, `${p}l`);
  await router.exec('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);
  const server = `require('net').createServer((s) => { s.on('error', () => {}); s.end(s.remoteAddress + '\\n'); }).listen(${PORT}, '${LAN_HOST}')`;
  const [cmd, argv] = lan.wrap(process.execPath, ['-e', server]);
  const { spawn } = await import('node:child_process');
  const child = spawn(cmd, argv, { stdio: 'ignore' });
  t.teardown(() => void child.kill('SIGKILL'));
  const connect = async (source: string) => {
    const js = `const s = require('net').connect({ host: '${LAN_HOST}', port: ${PORT}, localAddress: '${source}' }); let d = ''; s.on('data', (x) => (d += x)); s.on('end', () => { console.log(d.trim()); process.exit(0); }); s.on('error', () => process.exit(1)); setTimeout(() => process.exit(1), 1000);`;
    return mesh.exec(process.execPath, ['-e', js]).then(
      (r) => r.stdout.trim() || null,
      () => null,
    );
  };
  await until('the LAN host serving', async () => (await lan.exec('ss', ['-ltn'])).stdout.includes(`:${PORT}`), 30, 100);
  return { mesh, router, lan, iif: `${p}ta`, connect };
}

const forward = (iif: string, masquerade = true, to = [LAN]): RouteForward => ({
  group: 'lan',
  iif,
  to,
  allow: [{ from: ['100.96.0.2/32'], ports: [{ protocol: 'tcp', range: String(PORT) }] }],
  masquerade,
});

/** The found firewall's lines without the marked ones. */
const unmarked = (text: string) =>
  text
    .split('\n')
    .filter((l) => !/meshp:/.test(l) && !/^#/.test(l))
    .map((l) => l.replace(/\[\d+:\d+\]/, '').replace(/ # handle \d+/, ''))
    .join('\n');

interface Kind {
  name: string;
  load(b: Bed, root: string): Promise<void>;
  driver(b: Bed, root: string): FirewallDriver;
  found(b: Bed): Promise<string>;
  nat(b: Bed): Promise<string>;
}

const KINDS: Kind[] = [
  {
    name: 'nftables',
    load: async (b, root) => void (await b.router.exec('nft', ['-f', join(root, 'etc/nftables.conf')])),
    driver: (b, root) =>
      new NftablesDriver({
        runner: localRunner(netnsPrefix(b.router.name)),
        spawner: localSpawner(netnsPrefix(b.router.name)),
        root,
        configFile: '/etc/nftables.conf',
      }),
    found: async (b) => (await b.router.exec('nft', ['-a', 'list', 'table', 'inet', 'filter'])).stdout,
    nat: async (b) => (await b.router.exec('nft', ['list', 'ruleset'])).stdout,
  },
  {
    name: 'iptables-nft',
    load: async (b, root) => void (await b.router.exec('iptables-nft-restore', [join(root, 'etc/iptables/rules.v4')])),
    driver: (b, root) => new IptablesDriver('nft', { runner: nsenterRunner(b.router.path), root }),
    found: async (b) => (await b.router.exec('iptables-nft-save', ['-t', 'filter'])).stdout,
    nat: async (b) => (await b.router.exec('iptables-nft-save', ['-t', 'nat'])).stdout,
  },
];

for (const k of KINDS) {
  t.test(`${k.name}: a route's forwarded path in the found firewall's own terms`, { skip: labAvailable() ? false : 'needs root for namespaces' }, async (t) => {
    const b = await bed(t);
    const root = await mkdtemp(join(tmpdir(), 'rfw-root-'));
    t.teardown(() => rm(root, { recursive: true, force: true }));
    await sh('mkdir', ['-p', join(root, 'etc/iptables')]);
    await writeFile(join(root, 'etc/nftables.conf'), NFT_FOUND);
    await writeFile(join(root, 'etc/iptables/rules.v4'), IPT_FOUND);
    await k.load(b, root);
    const found = unmarked(await k.found(b));
    t.equal(await b.connect('100.96.0.2'), null, 'the found firewall drops forwarding: nothing reaches the LAN');

    const d = k.driver(b, root);
    const r = await d.ensure([], [], [forward(b.iif)]);
    t.same(r.added, ['route/lan'], 'the route is added');
    t.equal(await b.connect('100.96.0.2'), '192.168.77.1', 'an allowed source reaches the LAN host, masqueraded to the router');
    t.equal(await b.connect('100.96.0.3'), null, 'a source the policy does not allow does not');
    t.equal(unmarked(await k.found(b)), found, 'the found firewall differs only by marked rules');
    t.match(await k.nat(b), /masquerade|MASQUERADE/, 'the masquerade stands in nat postrouting');
    t.same((await d.ensure([], [], [forward(b.iif)])).added, [], 'a second ensure changes nothing');

    // The operator reloads their own firewall: the marked rules are gone, the next ensure puts them back.
    await k.load(b, root);
    t.equal(await b.connect('100.96.0.2'), null, 'after the reload the forward is dropped again');
    await d.ensure([], [], [forward(b.iif)]);
    t.equal(await b.connect('100.96.0.2'), '192.168.77.1', 'and is back after the next ensure');
    t.equal(unmarked(await k.found(b)), found, 'the found firewall differs only by marked rules after the reload');

    // No masquerade: the LAN host sees the mesh address (it has a route back).
    await b.lan.exec('ip', ['route', 'add', '100.96.0.0/24', 'via', '192.168.77.1']);
    await d.ensure([], [], [forward(b.iif, false)]);
    t.equal(await b.connect('100.96.0.2'), '100.96.0.2', 'masquerade off: the LAN host sees the mesh source');
    t.notMatch(await k.nat(b), /masquerade|MASQUERADE/, 'no masquerade rule');

    // The node stops serving: every marked rule goes, the found firewall is as it was.
    const gone = await d.ensure([], [], []);
    t.same(gone.removed, ['route/lan'], 'the route is removed');
    t.notMatch(await k.found(b), /meshp:/, 'no marked rule is left');
    t.notMatch(await k.nat(b), /masquerade|MASQUERADE|meshp_route/, 'nor the masquerade');
    t.equal(unmarked(await k.found(b)), found, 'the found firewall is as found');
    t.equal(await b.connect('100.96.0.2'), null, 'and forwards nothing again');

    // Converged: the derived filter forwards what the policy allows, and nothing else.
    await d.retire();
    await d.loadDerived({ openings: [], refusals: [], forwards: [forward(b.iif)] });
    t.equal(await b.connect('100.96.0.2'), '192.168.77.1', 'converged: the derived filter forwards the allowed source, masqueraded');
    t.equal(await b.connect('100.96.0.3'), null, 'and not another');
    await d.unloadDerived();
    await d.ensure([], [], []);
    t.notMatch(await k.nat(b), /masquerade|MASQUERADE|meshp_route/, 'the masquerade goes with the forward');
  });
}

for (const k of KINDS) {
  t.test(`${k.name}: an exit node's forward to 0.0.0.0/0 and ::/0`, { skip: labAvailable() ? false : 'needs root for namespaces' }, async (t) => {
    const b = await bed(t, 'exf');
    const root = await mkdtemp(join(tmpdir(), 'exf-root-'));
    t.teardown(() => rm(root, { recursive: true, force: true }));
    await sh('mkdir', ['-p', join(root, 'etc/iptables')]);
    await writeFile(join(root, 'etc/nftables.conf'), NFT_FOUND);
    await writeFile(join(root, 'etc/iptables/rules.v4'), IPT_FOUND);
    await k.load(b, root);
    const found = unmarked(await k.found(b));
    const exit = forward(b.iif, true, ['0.0.0.0/0', '::/0']);
    const d = k.driver(b, root);
    t.same((await d.ensure([], [], [exit])).added, ['route/lan'], 'the default routes load');
    t.equal(await b.connect('100.96.0.2'), '192.168.77.1', 'an allowed source reaches a host behind it, masqueraded');
    t.equal(await b.connect('100.96.0.3'), null, 'a source the policy does not allow does not');
    t.match(await k.found(b), /meshp:route\/lan\//, 'the marked accepts stand in the found forward chain');
    const again = await d.ensure([], [], [exit]);
    t.same([again.added, again.removed], [[], []], 'a second ensure reads them back as wanted: nothing changes');
    t.equal(unmarked(await k.found(b)), found, 'the found firewall differs only by marked rules');
    t.same((await d.ensure([], [], [])).removed, ['route/lan'], 'without the forward they go');
    t.notMatch((await k.found(b)) + (await k.nat(b)), /meshp:route|meshp_route/, 'every marked rule and the masquerade');
    t.equal(unmarked(await k.found(b)), found, 'the found firewall is as found');
  });
}

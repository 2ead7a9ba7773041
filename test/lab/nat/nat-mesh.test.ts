/**
 * The NAT lab end to end (issue 27): a real `meshp controller` (genesis control-node m1, its agent) and
 * Debian's coturn on the public side (p0), and real agents enrolled from sites behind real NAT
 * routers (natNet): a and b each behind an endpoint-independent NAT, c and d behind symmetric ones
 * (`masquerade fully-random`); d's router also drops every UDP datagram to p0 but its tunnel port, so
 * d reaches no relay. Nothing is played by the test: the relay and the policy are set with the CLI
 * (previewed, then --yes), the endpoints are what the controller learned. The policy allows a↔b, a↔c,
 * b↔c and c↔d on 7000; d↔a and d↔b are forbidden.
 *
 * 1. a↔b handshake directly: each device's endpoint for the other is its NAT's mapping, TCP flows; a's
 *    endpoint for b, sampled all along the file, is never a relay proxy (127.0.0.1).
 * 2. a↔c and b↔c go through coturn: each device's endpoint is its loopback relay proxy; TCP flows.
 * 3. d↔a and d↔b have no peer and no TCP.
 * 4. The path status the controller shows (`node list --json`, `node show --json`, `doctor`, `/metrics`)
 *    is checked claim by claim against `wg show` in that node's namespace; `node list` flags c and d
 *    PEER-UNREACHABLE (c↔d: both symmetric, d reaches no relay: no path) and says a and b are ok.
 * 5. `meshp node remove c`: a and b lose c's peer and its relayed socket; `relay list` drops c's
 *    allocation. On coturn itself: an allocation's relayed address is a UDP socket coturn's process
 *    holds in p0 (`ss -ulnp`) for as long as the allocation lives (coturn's log is not read: piped,
 *    it comes in blocks). c's agent, leaving, deletes its allocation (relay-proxy.ts: a Refresh of
 *    lifetime 0 on close), so coturn frees it at once, not when its lifetime (600 s) ends unrefreshed.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { workdir, writeJson } from '../../helpers/grpc-procs.js';
import { labAvailable } from '../../helpers/netns.js';
import type { Subtest } from '../../helpers/tap-types.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { HANDSHAKE_STALE_SECONDS } from '@meshp/controller';
import { keyOf, meshAddress, meshBed, reaches, reachesSoon, wgEndpoints, wgPeers, PORT, type Node } from '../tunnel-wireguard/mesh-bed.js';
import { P0_IP, TURN_PORT, coturn, natNet, type NatKind } from './bed.js';

fileBudget(300);

const SECRET = randomBytes(16).toString('hex');
const METRICS = '127.0.0.1:9464';
const KINDS: NatKind[] = ['endpoint-independent', 'endpoint-independent', 'symmetric', 'symmetric'];
const NAMES = ['a', 'b', 'c', 'd'];
const isProxy = (e: string | undefined | null) => !!e && e.startsWith('127.0.0.1:');

interface Path {
  peer: string;
  state: string;
  path: string | null;
  endpoint: string | null;
  ageSeconds: number | null;
}
interface Listed {
  name: string;
  status: string;
  statusDetail: string;
  handshakes: { reported: boolean; peers: number; paths: Path[] } | null;
}

t.test(
  'the NAT lab end to end: a real controller and coturn on the public side, real agents behind real NATs',
  { skip: labAvailable() ? false : 'needs root for namespaces, nftables, Docker, wireguard-go and coturn (CI runs it as root)' },
  async (t) => {
    const started = Date.now();
    const dir = workdir(t, 'natmesh');
    let publicIps: string[] = [];
    const b = await meshBed(t, dir, KINDS.length, 'nl', async (prefix) => {
      const net = await natNet(t, prefix, KINDS);
      publicIps = net.sites.map((s) => s.publicIp);
      // d reaches p0's tunnel port, nothing else over UDP: no relay.
      await net.sites[3]!.router.exec(
        'nft',
        ['-f', '-'],
        `table inet meshp_lab_norelay {\n  chain out { type filter hook forward priority -10; ip daddr ${P0_IP} udp dport != 51820 drop; }\n}\n`,
      );
      return {
        under: net.under,
        c: net.p0,
        controlIp: P0_IP,
        outside: await net.machine('o', 20),
        agents: net.sites.map((s, k) => ({ name: NAMES[k]!, ns: s.ns, endpoint: null })),
        controllerArgs: ['--metrics-listen', METRICS],
      };
    });
    const [a, bb, c, d] = b.agents as [Node, Node, Node, Node];
    const m1 = b.c;
    const all = [a, bb, c, d];
    await coturn(t, { ns: m1.ns }, SECRET);
    /** Whether coturn's process holds a UDP socket at `address` in p0 (an allocation's relayed socket: it lives as long as the allocation). */
    const coturnHolds = async (address: string) =>
      !!address && (await m1.ns.exec('ss', ['-Hulnp'])).stdout.split('\n').some((l) => l.includes(` ${address} `) && l.includes('"turnserver"'));

    await t.test('the relay and the policy are set by the CLI, each previewed first', async (t) => {
      const secretFile = join(dir, 'turn.secret');
      writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
      const set = ['relay', 'set', 'lab', '--server', `${P0_IP}:${TURN_PORT}`, '--secret', 'turn', '--secret-file', secretFile];
      t.match(await b.cli(...set, '--preview'), /\(preview: nothing changed\)/, 'relay set --preview');
      t.same(JSON.parse(await b.cli('relay', 'list', '--json')).relays, [], 'the preview stored nothing');
      t.match(await b.cli(...set, '--yes'), /relay lab: 10\.96\.0\.10:3478\/udp, secret turn .* set/);
      const pairs = [
        ['a', 'b'],
        ['a', 'c'],
        ['b', 'c'],
        ['c', 'd'],
      ];
      const rules = pairs.flatMap(([x, y]) => [
        { from: x!, to: y!, ports: [`${PORT}/tcp`] },
        { from: y!, to: x!, ports: [`${PORT}/tcp`] },
      ]);
      const file = writeJson(dir, 'policy.json', { rules });
      t.match(await b.cli('policy', 'set', file, '--preview'), /preview/, 'policy set --preview');
      await b.cli('policy', 'set', file, '--yes');
      t.equal(JSON.parse(await b.cli('policy', 'get', '--json')).rules.length, rules.length, 'the policy in force');
    });

    // Adopted: the members run --firewall none (no derived filter). m1 too: coturn beside it is the
    // operator's, not a foundation module, and no derived filter of m1's would open its ports.
    const tokens = await Promise.all(
      NAMES.map(async (tag) => (JSON.parse(await b.cli('token', 'create', '--adopted', '--tag', tag, '--json')) as { token: string }).token),
    );
    b.startAgent(m1, ['--firewall', 'none']);
    all.forEach((n, k) => b.startAgent(n, ['--token', tokens[k]!]));
    for (const n of [m1, ...all]) await n.proc!.waitFor((l) => l.msg === 'tunnel attached', 120_000);
    const key = new Map([m1, ...all].map((n) => [n.name, keyOf(n)]));
    const mesh = new Map<string, string>();
    for (const n of [m1, ...all]) mesh.set(n.name, await meshAddress(n));
    const ep = async (x: Node, y: Node) => (await wgEndpoints(x)).get(key.get(y.name)!);
    /** a's endpoint for b, sampled all along: never a relay proxy. */
    const abSamples: string[] = [];
    const sample = async () => {
      const e = await ep(a, bb);
      if (e && e !== '(none)') abSamples.push(e);
    };
    const handshaked = async (x: Node, y: Node, relayed: boolean) => {
      await sample();
      const [e, hs] = [await ep(x, y), (await wgPeers(x)).get(key.get(y.name)!) ?? 0];
      return hs > 0 && isProxy(e) === relayed && !!e && e !== '(none)';
    };
    t.comment(`enrolled and attached ${Math.round((Date.now() - started) / 1000)} s in`);

    await t.test('every node that reaches coturn has an allocation; relay list says it', async (t) => {
      const allocs = await until(
        'a, b, c allocated',
        async () => {
          const r = JSON.parse(await b.cli('relay', 'list', '--json')) as { relays: { allocations: { node: string; relayedAddress?: string }[] }[] };
          const got = r.relays[0]?.allocations ?? [];
          return ['a', 'b', 'c'].every((n) => got.some((x) => x.node === n)) ? got : false;
        },
        60,
        2000,
      );
      t.notOk(
        allocs.some((x) => x.node === 'd'),
        'd, cut off from the relay, has none',
      );
      for (const n of ['a', 'b', 'c']) {
        const at = allocs.find((x) => x.node === n)!.relayedAddress ?? '';
        t.ok(await coturnHolds(at), `${n}: relayed at ${at}, a socket coturn holds on p0`);
      }
    });

    await t.test('a and b, behind endpoint-independent NATs, handshake directly at each other’s NAT mapping; TCP flows', async (t) => {
      await until('a and b handshake directly', () => handshaked(a, bb, false), 90, 1000);
      await until('b and a handshake directly', () => handshaked(bb, a, false), 30, 1000);
      t.equal(await ep(a, bb), `${publicIps[1]}:51820`, "a sends to b's NAT mapping");
      t.equal(await ep(bb, a), `${publicIps[0]}:51820`, "b sends to a's NAT mapping");
      t.ok(await reachesSoon(a.ns, mesh.get('b')!, PORT), 'TCP a → b:7000');
      t.ok(await reachesSoon(bb.ns, mesh.get('a')!, PORT), 'TCP b → a:7000');
    });

    await t.test('a↔c and b↔c (c behind a symmetric NAT) go through coturn; TCP flows', async (t) => {
      for (const [x, y] of [
        [a, c],
        [bb, c],
      ] as const) {
        await until(`${x.name} and ${y.name} handshake through the relay`, () => handshaked(x, y, true), 150, 1000);
        await until(`${y.name} and ${x.name} handshake through the relay`, () => handshaked(y, x, true), 30, 1000);
        t.pass(`${x.name} ↔ ${y.name}: both devices' endpoints are their relay proxies, with a handshake`);
        t.ok(await reachesSoon(x.ns, mesh.get(y.name)!, PORT), `TCP ${x.name} → ${y.name}:7000 through coturn`);
        t.ok(await reachesSoon(y.ns, mesh.get(x.name)!, PORT), `TCP ${y.name} → ${x.name}:7000`);
      }
    });

    await t.test('d↔a and d↔b, forbidden by the policy, have no peer and no TCP', async (t) => {
      t.notOk((await wgPeers(a)).has(key.get('d')!), 'a has no peer d');
      t.notOk((await wgPeers(bb)).has(key.get('d')!), 'b has no peer d');
      const dPeers = await wgPeers(d);
      t.notOk(dPeers.has(key.get('a')!) || dPeers.has(key.get('b')!), 'd has neither');
      t.notOk(await reaches(d.ns, mesh.get('a')!, PORT), 'no TCP d → a');
      t.notOk(await reaches(a.ns, mesh.get('d')!, PORT), 'no TCP a → d');
      t.notOk(await reaches(d.ns, mesh.get('b')!, PORT), 'no TCP d → b');
    });

    const list = async () => new Map((JSON.parse(await b.cli('node', 'list', '--json')) as { nodes: Listed[] }).nodes.map((n) => [n.name, n]));
    /** `node list --json` every few seconds (a CLI process each) until `done`; a's endpoint for b sampled each time. */
    const listed = (what: string, idleSeconds: number, everyMs: number, done: (m: Map<string, Listed>) => boolean) =>
      until(
        what,
        async () => {
          await sample();
          const m = await list();
          return done(m) ? m : false;
        },
        idleSeconds,
        everyMs,
      );
    /**
     * Every claim of one node's paths (from `read`) against `wg show` in its namespace: the peers, each
     * endpoint, direct or relayed (relayed: the device sends to its loopback relay proxy), connected
     * only on a handshake wg show has. A report is a moment a few seconds old and a peer without a
     * handshake changes candidate every 15 s: read again (a few times) until the two agree, or fail
     * with what differed.
     */
    const claims = async (t: Subtest, n: Node, read: () => Promise<Path[]>, what: string): Promise<Path[]> => {
      let wrong: string[] = [];
      for (let i = 0; i < 6; i++) {
        const paths = await read();
        const [endpoints, handshakes] = await Promise.all([wgEndpoints(n), wgPeers(n)]);
        wrong = [];
        const said: string[] = [];
        if (paths.length !== handshakes.size) wrong.push(`${paths.length} paths, ${handshakes.size} peers on the device`);
        for (const p of paths) {
          const k = key.get(p.peer)!;
          const e = endpoints.get(k);
          const onDevice = e && e !== '(none)' ? e : null;
          if (!handshakes.has(k)) wrong.push(`${p.peer}: not on the device`);
          if (p.endpoint !== onDevice) wrong.push(`${p.peer}: endpoint ${p.endpoint}, wg show ${onDevice}`);
          if (p.endpoint && p.path !== (isProxy(onDevice) ? 'relayed' : 'direct')) wrong.push(`${p.peer}: ${p.path} at ${onDevice}`);
          if ((p.state === 'connected') !== (handshakes.get(k) ?? 0) > 0) wrong.push(`${p.peer}: ${p.state}, wg show's handshake ${handshakes.get(k)}`);
          said.push(`${p.peer} ${p.state} ${p.path ?? '-'} ${p.endpoint ?? '-'}`);
        }
        if (wrong.length === 0) {
          t.pass(`${what} ${n.name}'s ${paths.length} paths are wg show's: ${said.join(', ')}`);
          return paths;
        }
        await new Promise((r) => setTimeout(r, 2_500));
      }
      t.same(wrong, [], `${what} ${n.name}'s paths are wg show's`);
      return [];
    };

    await t.test("the controller's path status, claim by claim against wg show", async (t) => {
      // A report is a moment: wait for one where a, b and c have every peer connected (all are up),
      // none on a direct trial (a relayed peer's direct candidate set for 5 s now and then: trying).
      const m = await listed('every path of a, b, c connected', 90, 3000, (m) =>
        [a, bb, c].every((n) => {
          const paths = (m.get(n.name)?.handshakes?.paths ?? []).filter((p) => p.peer !== 'd');
          return paths.length >= 3 && paths.every((p) => p.state === 'connected' && p.path !== 'trying');
        }),
      );
      const pathsOf = async (n: string) => (await list()).get(n)?.handshakes?.paths ?? [];
      for (const n of [a, bb, c]) await claims(t, n, () => pathsOf(n.name), 'node list:');
      const paths = (n: string) => m.get(n)!.handshakes!.paths;
      t.match(
        paths('a').find((p) => p.peer === 'c'),
        { state: 'connected', path: 'relayed', endpoint: /^127\.0\.0\.1:\d+$/ },
        'a → c relayed',
      );
      t.match(
        paths('a').find((p) => p.peer === 'b'),
        { state: 'connected', path: 'direct', endpoint: `${publicIps[1]}:51820` },
        'a → b direct',
      );
      const shown = async () => {
        const r = JSON.parse(await b.cli('node', 'show', 'c', '--json')) as { node?: Listed } & Listed;
        return (r.node ?? r).handshakes?.paths ?? [];
      };
      await claims(t, c, shown, 'node show:');
      // doctor and /metrics read the latest report: asked again while a trial of a's runs (it says trying then).
      const { doctor, aEndpoints } = await until(
        'doctor a: no trial running',
        async () => {
          const doctor = await b.cli('doctor', 'a');
          return /^ {2}peer c: connected, relayed via /m.test(doctor) ? { doctor, aEndpoints: await wgEndpoints(a) } : null;
        },
        30,
        1000,
      );
      t.match(
        doctor,
        new RegExp(`^ {2}peer c: connected, relayed via ${aEndpoints.get(key.get('c')!)!.replace(/\./g, '\\.')}, last handshake `, 'm'),
        'doctor a: c relayed, at the proxy wg show has',
      );
      t.match(
        doctor,
        new RegExp(`^ {2}peer b: connected, direct via ${publicIps[1]!.replace(/\./g, '\\.')}:51820, `, 'm'),
        'doctor a: b direct, at its mapping',
      );
      const metrics = await until(
        '/metrics: no trial running',
        async () => {
          const text = (await m1.ns.exec('curl', ['-sf', `http://${METRICS}/metrics`])).stdout;
          return /meshp_peer_connected\{[^}]*path="trying"/.test(text) ? null : text;
        },
        30,
        1000,
      );
      const series = (node: string, peer: string) =>
        metrics.split('\n').find((l) => l.startsWith('meshp_peer_connected{') && l.includes(`node="${node}"`) && l.includes(`peer="${peer}"`)) ?? '';
      t.match(series('a', 'c'), /path="relayed".* 1$/, '/metrics: a → c relayed, connected');
      t.match(series('a', 'b'), /path="direct".* 1$/, '/metrics: a → b direct, connected');
      t.match(series('c', 'b'), /path="relayed".* 1$/, '/metrics: c → b relayed, connected');
    });

    await t.test('node list flags c and d, which cannot reach each other, and not a and b', async (t) => {
      // c↔d: the peer has been reported since enrolment, never handshaked; flagged past the limit.
      const m = await listed('c and d flagged', HANDSHAKE_STALE_SECONDS + 60, 5000, (m) => ['c', 'd'].every((n) => m.get(n)?.status === 'peer-unreachable'));
      t.match(m.get('c')!.statusDetail, /^cannot reach 1 of its 4 tunnel peers: d \(never handshaked; /, 'c names d');
      t.match(m.get('d')!.statusDetail, /^cannot reach 1 of its 2 tunnel peers: c \(never handshaked; /, 'd names c');
      const dPaths = await claims(t, d, async () => (await list()).get('d')?.handshakes?.paths ?? [], 'node list:');
      t.equal(dPaths.find((p) => p.peer === 'c')?.state, 'never', 'd → c: never, and wg show has no handshake');
      for (const n of ['a', 'b']) t.equal(m.get(n)?.status, 'ok', `${n}: ok`);
      t.match(await b.cli('node', 'list'), /^c\s+PEER-UNREACHABLE\s/m, 'in capitals in the table');
    });

    await t.test('node remove c: a and b lose its peer and relayed socket; relay list drops its allocation', async (t) => {
      const sockets = async (n: Node) => (await n.ns.exec('ss', ['-Huln'])).stdout.split('\n').filter((l) => /127\.0\.0\.1:\d+/.test(l)).length;
      const had = new Map([a, bb].map((n) => [n, 0]));
      for (const n of [a, bb]) had.set(n, await sockets(n));
      const relayed = new Map(
        (
          JSON.parse(await b.cli('relay', 'list', '--json')) as { relays: { allocations: { node: string; relayedAddress: string }[] }[] }
        ).relays[0]!.allocations.map((x) => [x.node, x.relayedAddress]),
      );
      t.ok(await coturnHolds(relayed.get('c')!), `c's allocation on coturn before: ${relayed.get('c')}`);
      await b.cli('node', 'remove', 'c', '--yes');
      t.equal(await c.proc!.exited, 3, "c's agent, told it was removed, left and exited 3");
      for (const n of [a, bb]) {
        await until(`${n.name} loses c`, async () => !(await wgPeers(n)).has(key.get('c')!), 30, 500);
        t.pass(`${n.name}'s device has no peer c`);
        await until(`${n.name}'s relayed socket for c closed`, async () => (await sockets(n)) === had.get(n)! - 1, 15, 500);
        t.pass(`${n.name}'s relayed socket for c is closed`);
      }
      for (const n of ['a', 'b']) t.ok(await coturnHolds(relayed.get(n)!), `${n}'s allocation stays (${relayed.get(n)})`);
      await until("coturn frees c's allocation", async () => !(await coturnHolds(relayed.get('c')!)), 15, 500);
      t.pass(`coturn freed c's allocation (${relayed.get('c')}) on its removal`);
      const listed = JSON.parse(await b.cli('relay', 'list', '--json')) as { relays: { allocations: { node: string }[] }[] };
      const now = listed.relays[0]!.allocations.map((x) => x.node);
      t.ok(now.includes('a') && now.includes('b') && !now.includes('c'), `relay list: a and b allocated, c no more (${now.join(', ')})`);
      t.ok(await reachesSoon(a.ns, mesh.get('b')!, PORT), 'a → b goes on');
    });

    await sample();
    t.same(abSamples.filter(isProxy), [], `a never sent b to the relay (${abSamples.length} samples of wg show)`);
    t.comment(`${Math.round((Date.now() - started) / 1000)} s`);
  },
);

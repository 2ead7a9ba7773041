/**
 * A relayed pair's paths over time (issue 27, ADR 0046), through real NAT and two real coturn. a and b
 * each behind an endpoint-independent NAT, whose direct path is blocked at first (an nft drop in a's
 * router). p0 (the control-node's tunnel, and both coturn: lab1 on 3478, lab2 on 3480) is the public
 * side. The test plays the controller with its own functions (relaysFor with a short credential
 * lifetime, endpointsOf, mappingsOf), as relay-fallback.test.ts does.
 *
 * 1. Blocked: a and b fall back to lab1 (the first relay), TCP flows; a held connection is probed
 *    every second from then on. Their direct trials fail while the block holds: back to the relay.
 * 2. The credential (45 s) is renewed by a new relays component before it expires; coturn keeps the
 *    allocation past the first credential's expiry (the same relayed address, refreshed under the
 *    username it was made with: coturn refuses another on it), and the renewed one is what the next
 *    allocation is made with.
 * 3. lab1 killed: each node allocates on lab2 (the next relay of the view) with the renewed
 *    credential (the first has expired) and reports it; the relayed pair flows again through lab2;
 *    the direct pair a↔p0 never notices.
 * While blocked, every sample of a's path to b is checked: the report says `trying` whenever the
 *    device is on a direct candidate (a trial), never `direct`.
 * 4. The block lifted: a direct trial proves the direct path and both keep it (`wg show`: the peer's
 *    NAT mapping); the held connection survived it all.
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { relaysFor, turnCredential, type StoredRelays } from '@meshp/core/delta';
import { labAvailable } from '../../helpers/netns.js';
import { until } from '../../helpers/budget.js';
import { PORT, WG_PORT, type LabNode } from '../tunnel-wireguard/bed.js';
import { P0_IP, TURN_PORT, coturn, natBed } from './bed.js';
import { playedController, report } from './played.js';

const SECRET = randomBytes(16).toString('hex');
const REFRESH_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'refresh-as.mjs');
/** The first credential's lifetime; the renewed one is the controller's usual (RELAY_CREDENTIAL_S is an hour, ten minutes here). */
const TTL_S = 45;
const RENEWED_TTL_S = 600;
const LAB2_PORT = 3480;
const relayRecord = (id: string, port: number) => ({ id, address: P0_IP, port, transport: 'udp', region: '', secretName: 'turn' });
const stored = (mintedAt: number): StoredRelays => ({
  relays: [relayRecord('lab1', TURN_PORT), relayRecord('lab2', LAB2_PORT)],
  secrets: { turn: SECRET },
  mintedAt,
});
const rules = [{ sourceTags: ['site'], destinationTags: ['site'], ports: ['7000'] }];
const nowS = () => Math.floor(Date.now() / 1000);
const isProxy = (endpoint: string) => endpoint.startsWith('127.0.0.1:');

async function wgShow(n: LabNode): Promise<Map<string, { endpoint: string; handshake: number }>> {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'dump']);
  const rows = stdout.trim().split('\n').slice(1).filter(Boolean);
  return new Map(rows.map((r) => r.split('\t')).map((f) => [f[0]!, { endpoint: f[2] === '(none)' ? '' : f[2]!, handshake: Number(f[4]) }]));
}

t.test(
  'a relayed pair: credential renewed on coturn, failover to a second relay, back to direct',
  { skip: labAvailable() ? false : 'needs root for namespaces, nftables, wireguard-go and coturn (CI runs it as root)' },
  async (t) => {
    const { p0, sites } = await natBed(t, ['endpoint-independent', 'endpoint-independent'], 'rp');
    const [ra, rb] = sites as [(typeof sites)[0], (typeof sites)[0]];
    const [a, b] = [ra.node, rb.node];
    const lab1 = await coturn(t, p0, SECRET);
    await coturn(t, p0, SECRET, { port: LAB2_PORT, minPort: 49201, maxPort: 49240 });
    // a's router drops what goes to b's router and what comes from it: no direct path at first.
    const block = `table inet rp_block {\n  chain blk { type filter hook forward priority -10; ip daddr ${rb.publicIp} drop; ip saddr ${rb.publicIp} drop; }\n}\n`;
    await ra.router.exec('nft', ['-f', '-'], block);
    const directTrials = { firstMs: 20_000, capMs: 40_000 };
    await p0.start(60_000);
    for (const n of [a, b]) await n.start(60_000, { directTrials });

    const { member, send, image, p0Peer, learn } = playedController(p0, [a, b], rules);
    const other = (n: LabNode) => (n === a ? b : a);
    const sendViews = async () => {
      for (const n of [a, b]) await send(n, { upsertPeers: [p0Peer, image(other(n))] });
    };
    const made = (n: LabNode) => n.lines.filter((l) => l.msg === 'relay allocation made');
    const relayedSince = async (x: LabNode, since: number) => {
      const w = (await wgShow(x)).get(other(x).publicKey);
      return !!w && w.handshake >= since && isProxy(w.endpoint);
    };

    const minted1 = nowS();
    await send(p0, { upsertPeers: [a, b].map((n) => ({ ...image(n), endpoints: [] })), filter: { rules: [] } });
    for (const n of [a, b]) await send(n, { upsertPeers: [p0Peer], relays: relaysFor({ id: n.name, tunnelKey: n.publicKey }, stored(minted1), TTL_S) });
    const firstUser = (n: LabNode) => relaysFor({ id: n.name, tunnelKey: n.publicKey }, stored(minted1), TTL_S).relays[0]!.username;

    // Sampled all along, from the first relayed handshake: the held connection a → b, a's path to p0.
    const probes: boolean[] = [];
    const p0Endpoints: string[] = [];
    /** While the block holds: a's device's endpoint for b beside the path a's report says (read right after). */
    const blockedPaths: { endpoint: string; said: string }[] = [];
    let blocked = true;
    let sampling = true;
    let sampler: Promise<void> = Promise.resolve();
    const startSampling = () => {
      const probing = (async () => {
        while (sampling) {
          probes.push((await a.request({ op: 'probe', host: b.mesh, port: PORT, timeoutMs: 1500 })).ok === true);
          p0Endpoints.push((await wgShow(a)).get(p0.publicKey)?.endpoint ?? '');
          await new Promise((r) => setTimeout(r, 1000));
        }
      })();
      // Beside it, faster (a trial's window is 5 s): a's device's endpoint for b and what a's report says.
      const paths = (async () => {
        while (sampling) {
          if (blocked) {
            const was = (await wgShow(a)).get(b.publicKey)?.endpoint ?? '';
            const said = (await report(a)).handshakes?.find((h) => h.peer === b.name)?.path ?? '';
            const now = (await wgShow(a)).get(b.publicKey)?.endpoint ?? '';
            // Only a sample whose device endpoint did not move across the report's read is a pair.
            if (now === was) blockedPaths.push({ endpoint: now, said });
          }
          await new Promise((r) => setTimeout(r, 400));
        }
      })();
      sampler = Promise.all([probing, paths]).then(() => undefined);
    };
    t.teardown(async () => {
      sampling = false;
      await sampler;
      // What the nodes said of their relay and paths, when something failed.
      if (!t.passing())
        for (const n of [a, b]) for (const l of n.lines.filter((l) => /relay|direct|candidate/.test(l.msg))) t.comment(`${n.name}: ${JSON.stringify(l)}`);
    });

    let renewed: StoredRelays | null = null;
    await t.test('blocked: a and b fall back to lab1, TCP flows', async (t) => {
      await until('both allocations on lab1', async () => (await Promise.all([a, b].map(report))).every((r) => r.relay?.relayId === 'lab1'), 60, 500);
      await until('p0 handshaked with a and b', async () => [...(await wgShow(p0)).values()].filter((w) => w.handshake > 0).length === 2, 60, 500);
      // The credential renewed while the first is still valid (the controller's half-life move, here sooner).
      t.ok(nowS() < minted1 + TTL_S, 'the renewal goes out before the first credential expires');
      renewed = stored(nowS());
      for (const n of [a, b]) await send(n, { relays: relaysFor({ id: n.name, tunnelKey: n.publicKey }, renewed, RENEWED_TTL_S) });
      await learn();
      await sendViews();
      const t0 = nowS() - 1;
      for (const n of [a, b]) await until(`${n.name} handshakes with ${other(n).name} through the relay`, () => relayedSince(n, t0), 150, 1000);
      t.ok(await a.reaches(b), 'TCP a → b through lab1');
      t.ok((await a.request({ op: 'hold', host: b.mesh, port: PORT, timeoutMs: 3000 })).ok, 'a holds a connection to b');
      startSampling();
    });

    await t.test('the credential renewed: the allocation outlives the first one on coturn', async (t) => {
      const before = new Map([a, b].map((n) => [n.name, member.get(n.name)!.relayedEndpoint]));
      // Past the first credential's expiry, then two of the watch's Refreshes (RELAY_WATCH_MS: 10 s).
      await until('the first credential expired 20 s ago', () => nowS() > minted1 + TTL_S + 20, 120, 1000);
      for (const n of [a, b]) {
        const r = await report(n);
        t.equal(r.relay?.relayedAddress, before.get(n.name), `${n.name}: the same allocation on lab1 past the first credential's expiry`);
        t.same(
          made(n).map((l) => l.username),
          [firstUser(n)],
          `${n.name}: one allocation, refreshed under the username it was made with`,
        );
        t.notOk(
          n.lines.some((l) => l.msg === 'relay allocation gone'),
          `${n.name}: never lost`,
        );
      }
      t.ok(await a.reaches(b), 'TCP a → b still through lab1');
      t.ok(
        [a, b].some((n) => n.lines.some((l) => l.msg === 'direct trial: no packet from the direct path, back to the relay')),
        'a direct trial ran while the block held, and went back to the relay',
      );
      for (const n of [a, b]) t.ok(isProxy((await wgShow(n)).get(other(n).publicKey)?.endpoint ?? ''), `${n.name}: on the relay (wg show)`);
      // Why the allocation keeps its first username: coturn refuses a Refresh under another one on it.
      const [first, second] = [turnCredential(SECRET, 'probe', 300), turnCredential(SECRET, 'probe', 600)];
      const { stdout } = await p0.ns.exec(process.execPath, [REFRESH_SCRIPT, JSON.stringify({ server: [P0_IP, TURN_PORT], first, second })]);
      const said = JSON.parse(stdout.trim().split('\n').at(-1)!) as { second: string; first: string };
      // coturn answers 441 Wrong Credentials (its -v log says so), signed with the session's key: the client takes no answer.
      t.not(said.second, 'ok', `coturn: a Refresh on an allocation under a renewed username is not taken (${said.second})`);
      t.equal(said.first, 'ok', 'coturn: under the username it was made with, taken');
    });

    await t.test('lab1 killed: both move to lab2 with the renewed credential; the relayed pair flows again; a↔p0 never notices', async (t) => {
      await lab1.kill();
      const back = nowS() - 1;
      await until('both allocations on lab2', async () => (await Promise.all([a, b].map(report))).every((r) => r.relay?.relayId === 'lab2'), 90, 1000);
      for (const n of [a, b]) {
        t.match((await report(n)).relay?.relayedAddress ?? '', /^10\.96\.0\.10:492(0[1-9]|[1-3]\d|40)$/, `${n.name}: relayed on lab2's range`);
        const user = relaysFor({ id: n.name, tunnelKey: n.publicKey }, renewed!, RENEWED_TTL_S).relays[1]!.username;
        t.equal(made(n).at(-1)?.username, user, `${n.name}: the new allocation is made with the renewed credential`);
      }
      await learn();
      await sendViews();
      for (const n of [a, b]) await until(`${n.name} handshakes through lab2`, () => relayedSince(n, back), 150, 1000);
      t.ok(await a.reaches(b), 'TCP a → b through lab2');
      t.ok(await b.reaches(a), 'TCP b → a through lab2');
    });

    await t.test('while blocked, a trial is said as one: the report never says direct where no packet came', async (t) => {
      const trials = blockedPaths.filter((p) => p.endpoint && !isProxy(p.endpoint));
      t.same(
        blockedPaths.filter((p) => p.said === 'direct'),
        [],
        `a's report never said b direct while no direct path existed (${blockedPaths.length} samples)`,
      );
      t.ok(trials.length > 0, `a's device was seen on a direct candidate of b (a trial) in ${trials.length} samples`);
      t.same(
        trials.filter((p) => p.said !== 'trying'),
        [],
        'each of them said trying',
      );
    });

    await t.test('the block lifted: a trial proves the direct path and both keep it; the held connection survived', async (t) => {
      blocked = false;
      await ra.router.exec('nft', ['delete', 'table', 'inet', 'rp_block']);
      const direct = async () => {
        const [wa, wb] = [await wgShow(a), await wgShow(b)];
        return wa.get(b.publicKey)?.endpoint === `${rb.publicIp}:${WG_PORT}` && wb.get(a.publicKey)?.endpoint === `${ra.publicIp}:${WG_PORT}`;
      };
      // Kept: direct on two looks 12 s apart (more than a trial's window: not both sides mid-trial).
      const kept = async () => {
        if (!(await direct())) return false;
        await new Promise((r) => setTimeout(r, 12_000));
        return direct();
      };
      await until('a and b on their direct path, kept (wg show: the peer’s NAT mapping)', kept, 180, 1000);
      t.ok(await direct(), "wg show: a sends to b's NAT mapping, b to a's");
      const path = (await report(a)).handshakes?.find((h) => h.peer === b.name);
      t.equal(path?.path, 'direct', "a's report: b direct");
      t.equal(path?.endpoint, `${rb.publicIp}:${WG_PORT}`, "a's report: at b's mapping, as wg show says");
      t.ok(await a.reaches(b), 'TCP a → b directly');
      sampling = false;
      await sampler;
      t.ok((await a.request({ op: 'probe', host: b.mesh, port: PORT, timeoutMs: 3000 })).ok, 'the connection a held since the start still carries data');
      const lost = probes.filter((p) => !p).length;
      t.ok(probes.length > 10 && probes.at(-1) === true, `the held connection answered ${probes.length - lost} of ${probes.length} probes (one a second)`);
      t.comment(`probes in order (. answered, x not): ${probes.map((p) => (p ? '.' : 'x')).join('')}`);
      t.same(
        p0Endpoints.filter((e) => e !== `${P0_IP}:${WG_PORT}`),
        [],
        `a↔p0 (direct) never moved (${p0Endpoints.length} samples of wg show)`,
      );
    });
  },
);

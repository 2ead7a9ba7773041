/**
 * The relay fallback (issue 27, ADR 0040), through real NAT and a real coturn: a and b each behind an
 * endpoint-independent NAT, c and d each behind a symmetric one (`masquerade fully-random`). Only p0
 * (where the controller and the relay run: here coturn, and p0's tunnel as the control-node's) is on
 * the public side. The test plays the controller with the controller's own functions: each node's
 * relays component is `relaysFor` (its own TURN REST credential under coturn's secret), each peer's
 * endpoints are `endpointsOf` (the told ones, the mapping p0's device saw, the relayed address the
 * node reported last). The policy lets a, b, c see each other and a see d; c↔d and b↔d are forbidden.
 *
 * 1. Every node gets an allocation and reports its relayed address (the tunnel plugin, relay-paths.ts).
 * 2. a↔b handshake directly (each at the other's NAT mapping), TCP flows, and a never sends b to the relay.
 * 3. a↔c, b↔c, a↔d have no direct path and fall back to coturn: each device's endpoint is its relay
 *    proxy on loopback, TCP flows, the path reported is relayed — every claim checked against `wg show`.
 * 4. c↔d, forbidden, have no path at all: no peer on either device, no TCP.
 * 5. coturn killed: a↔b go on; started again: the relayed pairs are relayed again (new allocations).
 * 6. `node remove c`: a and b lose c's peer and its relayed socket; c's agent closes its allocation (coturn freeing it is checked in nat-mesh.test.ts).
 */
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { REMOVAL_REASON, relaysFor, type StoredRelays } from '@meshp/core/delta';
import { labAvailable } from '../../helpers/netns.js';
import type { Subtest } from '../../helpers/tap-types.js';
import { until } from '../../helpers/budget.js';
import { WG_PORT, type LabNode } from '../tunnel-wireguard/bed.js';
import { P0_IP, TURN_PORT, coturn, natBed } from './bed.js';
import { playedController, report } from './played.js';

const SECRET = randomBytes(16).toString('hex');
const STORED: StoredRelays = {
  relays: [{ id: 'lab', address: P0_IP, port: TURN_PORT, transport: 'udp', region: '', secretName: 'turn' }],
  secrets: { turn: SECRET },
  mintedAt: Math.floor(Date.now() / 1000),
};
const rules = [{ sourceTags: ['site'], destinationTags: ['site'], ports: ['7000'] }];

/** `wg show IF dump` of the node: peer key → { endpoint, handshake }. */
async function wgShow(n: LabNode): Promise<Map<string, { endpoint: string; handshake: number }>> {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'dump']);
  const rows = stdout.trim().split('\n').slice(1).filter(Boolean);
  return new Map(rows.map((r) => r.split('\t')).map((f) => [f[0]!, { endpoint: f[2] === '(none)' ? '' : f[2]!, handshake: Number(f[4]) }]));
}
const isProxy = (endpoint: string) => endpoint.startsWith('127.0.0.1:');

t.test(
  'relay fallback on coturn',
  { skip: labAvailable() ? false : 'needs root for namespaces, nftables, wireguard-go and coturn (CI runs it as root)' },
  async (t) => {
    const { p0, sites } = await natBed(t, ['endpoint-independent', 'endpoint-independent', 'symmetric', 'symmetric'], 'rly');
    const [a, b, c, d] = sites.map((s) => s.node) as [LabNode, LabNode, LabNode, LabNode];
    const [ra, rb] = sites;
    const turn = await coturn(t, p0, SECRET);
    for (const n of [p0, a, b, c, d]) await n.start(60_000);
    const sees: Record<string, LabNode[]> = { [a.name]: [b, c, d], [b.name]: [a, c], [c.name]: [a, b], [d.name]: [a] };

    // The controller's records of each member: the mapping p0 saw, the relayed address it reported.
    const { member, send, image, p0Peer, learn } = playedController(p0, [a, b, c, d], rules);
    await send(p0, { upsertPeers: [a, b, c, d].map((n) => ({ ...image(n), endpoints: [] })), filter: { rules: [] } });
    for (const n of [a, b, c, d]) await send(n, { upsertPeers: [p0Peer], relays: relaysFor({ id: n.name, tunnelKey: n.publicKey }, STORED) });

    const sendViews = async () => {
      for (const n of [a, b, c, d]) await send(n, { upsertPeers: [p0Peer, ...sees[n.name]!.map(image)] });
    };

    /** Every path the node reports is what `wg show` says: the endpoint the device sends to, relayed exactly when that is its proxy. */
    const claimsHold = async (t: Subtest, n: LabNode) => {
      const [r, wg] = [await report(n), await wgShow(n)];
      for (const h of r.handshakes ?? []) {
        const w = wg.get(h.publicKey);
        t.ok(w, `${n.name} → ${h.peer}: on the device`);
        if (!w) continue;
        t.equal(h.endpoint ?? '', w.endpoint, `${n.name} → ${h.peer}: the endpoint reported is wg show's (${w.endpoint})`);
        // trying: a relayed peer's direct candidate on trial (the device's endpoint set by the node, not a proxy, the trial in its log).
        const onTrial = () => n.lines.some((l) => l.msg === 'relayed peer: trying its direct candidate' && l.peer === h.peer && l.endpoint === w.endpoint);
        const want = isProxy(w.endpoint) ? 'relayed' : h.path === 'trying' && onTrial() ? 'trying' : 'direct';
        if (h.endpoint) t.equal(h.path, want, `${n.name} → ${h.peer}: ${h.path}, as wg show's endpoint says`);
        if (h.latestHandshake > 0)
          t.ok(w.handshake > 0 && Math.abs(w.handshake - h.latestHandshake) <= 130, `${n.name} → ${h.peer}: a handshake wg show has too`);
      }
    };
    /** a's endpoint for b, sampled all along: never a relay proxy. */
    const abEndpoints: string[] = [];
    const sampleAb = async () => {
      const e = (await wgShow(a)).get(b.publicKey)?.endpoint;
      if (e) abEndpoints.push(e);
    };
    /** x reaches y by TCP, its device's endpoint for y on the relay proxy. */
    const relayedTo = async (x: LabNode, y: LabNode) => {
      await sampleAb();
      const w = (await wgShow(x)).get(y.publicKey);
      return !!w && isProxy(w.endpoint) && (await x.reaches(y));
    };
    const handshakedSince = async (x: LabNode, y: LabNode, since: number, relayed: boolean) => {
      await sampleAb();
      const w = (await wgShow(x)).get(y.publicKey);
      return !!w && w.handshake >= since && isProxy(w.endpoint) === relayed;
    };

    await t.test('every node has an allocation on coturn and reports its relayed address', async (t) => {
      await until('the relayed addresses reported', async () => (await Promise.all([a, b, c, d].map(report))).every((r) => r.relay?.relayedAddress), 60, 500);
      await until('p0 handshaked with every site', async () => [...(await wgShow(p0)).values()].filter((w) => w.handshake > 0).length === 4, 60, 500);
      await learn();
      for (const n of [a, b, c, d])
        t.match(member.get(n.name)!.relayedEndpoint, new RegExp(`^${P0_IP.replace(/\./g, '\\.')}:49[12]\\d\\d$`), `${n.name}: relayed on coturn's public side`);
      t.equal(member.get(a.name)!.mappedEndpoint, `${ra!.publicIp}:${WG_PORT}`, "a's mapping as p0 saw it");
    });
    await sendViews();
    const t0 = Math.floor(Date.now() / 1000) - 1;

    await t.test('a and b, behind endpoint-independent NATs, handshake directly; TCP flows; no relay', async (t) => {
      await until('a and b handshake directly', () => handshakedSince(a, b, t0, false), 90, 500);
      t.equal((await wgShow(a)).get(b.publicKey)?.endpoint, `${rb!.publicIp}:${WG_PORT}`, "a sends to b's NAT mapping");
      t.ok(await a.reaches(b), 'TCP flows a → b:7000');
      t.ok(await b.reaches(a), 'TCP flows b → a:7000');
      await claimsHold(t, a);
    });

    await t.test('a↔c, b↔c and a↔d (symmetric NAT) fall back to coturn; TCP flows; the paths say relayed, as wg show does', async (t) => {
      for (const [x, y] of [
        [a, c],
        [b, c],
        [a, d],
      ] as const) {
        await until(`${x.name} and ${y.name} handshake through the relay`, () => handshakedSince(x, y, t0, true), 150, 1000);
        t.ok(await x.reaches(y), `TCP flows ${x.name} → ${y.name}:7000 through coturn`);
        t.ok(await y.reaches(x), `TCP flows ${y.name} → ${x.name}:7000`);
      }
      // The report's path follows the device: a handshake through the proxy is reported once something came back through it.
      await until(
        "a's report: c relayed with a handshake",
        async () => (await report(a)).handshakes?.find((h) => h.peer === c.name && h.path === 'relayed' && h.latestHandshake > 0),
        30,
        500,
      );
      for (const n of [a, b, c, d]) await claimsHold(t, n);
    });

    await t.test('c↔d and b↔d, forbidden by the policy, have no path, direct or relayed', async (t) => {
      t.notOk((await wgShow(c)).has(d.publicKey), 'c has no peer d');
      t.notOk((await wgShow(d)).has(c.publicKey), 'd has no peer c');
      t.notOk((await wgShow(d)).has(b.publicKey), 'd has no peer b');
      t.notOk(await c.reaches(d), 'no TCP c → d');
      t.notOk(await d.reaches(b), 'no TCP d → b');
    });

    await t.test('coturn killed: a↔b go on; started again: the relayed pairs come back through it', async (t) => {
      await turn.kill();
      t.ok(await a.reaches(b), 'a → b while the relay is down');
      // A new allocation is told by the node's log, not by its address: the restarted relay may hand
      // a node the port it had before (its range here is 41 ports).
      const made = (n: LabNode) => n.lines.filter((l) => l.msg === 'relay allocation made').length;
      const before = new Map([a, b, c, d].map((n) => [n.name, made(n)]));
      await turn.start();
      // Each node sees its allocation gone (a Refresh the restarted relay does not know), makes a new one, reports it.
      try {
        await until(
          'every node has a new allocation',
          async () => {
            await sampleAb();
            await learn();
            return [a, b, c, d].every((n) => made(n) > before.get(n.name)! && member.get(n.name)!.relayedEndpoint);
          },
          90,
          1000,
        );
      } catch (e) {
        for (const n of [a, b, c, d])
          for (const l of n.lines.filter((l) => /relay/.test(String(l.msg ?? ''))).slice(-6)) t.comment(`  ${n.name} said: ${JSON.stringify(l)}`);
        t.comment(`coturn said: ${turn.lines.slice(-10).join(' | ')}`);
        throw e;
      }
      await sendViews();
      const since = Date.now();
      try {
        // Through the relay again: TCP flows with the device's endpoint on the proxy (the allocations
        // before the restart are gone from the relay, so it is the new ones that carry it). A new
        // handshake is not asked: the session made before the restart stays valid (WireGuard rekeys
        // 120-180 s after its last handshake), and packets flow under it as soon as the path is back.
        await until('a reaches c through the relay again', () => relayedTo(a, c), 150, 1000);
      } catch (e) {
        // What each side of the pair did and holds, for the reader of a failed run.
        for (const n of [a, c]) {
          const said = n.lines.filter((l) => /relay|candidate|trial/.test(String(l.msg ?? ''))).slice(-12);
          t.comment(`${n.name}: relayed ${member.get(n.name)!.relayedEndpoint}; wg show ${JSON.stringify([...(await wgShow(n)).entries()])}`);
          for (const l of said) t.comment(`  ${n.name} said: ${JSON.stringify(l)}`);
        }
        t.comment(`waited ${Date.now() - since} ms since the views went`);
        throw e;
      }
      t.pass('TCP a → c through the relay again');
      await until('c reaches b through the relay again', () => relayedTo(c, b), 150, 1000);
      t.pass('TCP c → b through the relay again');
      // The handshake said is one wg show has, on the relayed path, within WireGuard's session life.
      for (const [x, y] of [
        [a, c],
        [b, c],
      ] as const) {
        // Read off a direct trial (x's device on y's candidate for 5 s now and then: no packet comes from it).
        const w = await until(
          `${x.name}'s device on the relay for ${y.name}`,
          async () => {
            const w = (await wgShow(x)).get(y.publicKey);
            return w && isProxy(w.endpoint) ? w : null;
          },
          30,
          250,
        );
        t.ok(w.handshake > 0 && Date.now() / 1000 - w.handshake <= 180, `${x.name} → ${y.name}: relayed, a handshake within 180 s`);
      }
      t.ok(await a.reaches(b), 'a → b never noticed');
      await claimsHold(t, a);
    });

    await t.test('node remove c: a and b lose its peer and its relayed socket', async (t) => {
      // The loopback sockets a has bound; c's is the one a's device sends c to (a relay proxy), d's the same for d.
      const bound = async (n: LabNode) => new Set((await n.ns.exec('ss', ['-Huln'])).stdout.match(/127\.0\.0\.1:\d+/g) ?? []);
      // c and d (symmetric NAT) have no direct path to a: a's device holds them on the relay, but for
      // a's own direct trials of their candidates (5 s each, the first 60 s after they went relayed).
      const [forC, forD] = await until(
        "a's device on the relay for c and d (no direct trial running)",
        async () => {
          const wg = await wgShow(a);
          const both = [c, d].map((n) => wg.get(n.publicKey)?.endpoint ?? '');
          return both.every(isProxy) ? both : null;
        },
        30,
        250,
      );
      t.ok((await bound(a)).has(forC), `a sends c to its relayed socket (${forC})`);
      for (const n of [a, b]) await send(n, { removePeers: [{ id: c.name, reason: REMOVAL_REASON.REMOVED }] });
      t.notOk((await wgShow(a)).has(c.publicKey), "a's device has no peer c");
      t.notOk((await wgShow(b)).has(c.publicKey), "b's device has no peer c");
      // Closed by the delta's apply; a tick of the endpoint loop later (at most 5 s) at the latest.
      await until(`a's relayed socket for c (${forC}) closed`, async () => !(await bound(a)).has(forC), 10, 200);
      t.pass("a's relayed socket for c is closed");
      t.ok((await bound(a)).has(forD), `a's relayed socket for d (${forD}) is kept`);
      t.notOk(
        (await report(a)).handshakes?.some((h) => h.peer === c.name),
        "a's report has no path to c",
      );
      await c.request({ op: 'stop', down: true });
      // Asked a few times: a direct trial of a's may hold d's packets for its 5 s window.
      await until('a → d', () => a.reaches(d), 20, 500);
      t.pass('a → d still flows, relayed');
    });

    t.same(
      abEndpoints.filter((e) => isProxy(e)),
      [],
      `a never sent b to the relay (${abEndpoints.length} samples of wg show)`,
    );
    t.comment(`coturn: ${turn.lines.filter((l) => /allocation|session/i.test(l)).length} allocation/session lines`);
  },
);

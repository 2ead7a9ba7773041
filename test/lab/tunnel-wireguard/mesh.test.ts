/**
 * A real mesh over its own tunnel (issue 16): `meshp genesis` without `--private-interface` on the
 * control-node, three agents enrolling over the underlay (no shared private link), five namespaces.
 * Every pair the policy allows reaches each other over the tunnel (TCP), no other pair does; the
 * store answers over the tunnel and not from a machine outside, where only the control port (the
 * bootstrap door) answers; the converged control-node's derived filter lets the tunnel's UDP port
 * in; a node told no endpoint is reached where the controller saw it; a policy flap blocks a pair
 * and keeps its WireGuard session; under an empty policy every agent still reaches the control-node's
 * store and control (the mesh's own rule), and no other agent; a controller restart and an agent
 * restart tear no tunnel down; a new key is swapped in by the peers; `meshp node remove` takes the
 * node off every interface.
 */
import t from 'tap';
import Database from 'better-sqlite3';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { workdir } from '../../helpers/grpc-procs.js';
import { labAvailable } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { alive } from './bed.js';
import { CONTROL_IP, OTHER_PORT, PORT, STORE, keyOf, meshAddress, meshBed, reaches, reachesSoon, wgEndpoints, wgPeers, wgPid, type Node } from './mesh-bed.js';

fileBudget(240);

t.test(
  'genesis raises the tunnel as the private network; agents enrol over the underlay',
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const started = Date.now();
    const b = await meshBed(t, workdir(t, 'wgmesh'));
    const { c } = b;
    const [a1, a2, a3] = b.agents as [Node, Node, Node];
    const all = [c, a1, a2, a3];
    const rules = [
      { from: 'x', to: 'y', ports: [`${PORT}/tcp`] },
      { from: 'y', to: 'x', ports: [`${PORT}/tcp`] },
      { from: 'z', to: 'y', ports: [`${PORT}/tcp`] },
      // a1 may reach the control-node by a rule, on a port nothing serves; a2 and a3 by none: every
      // member has the control-node in view and reaches its foundation ports whatever the policy.
      { from: 'x', to: 'control-node', ports: ['9/tcp'] },
    ];
    const [, ...tokens] = await Promise.all([
      b.policy(rules),
      ...['x', 'y', 'z'].map(async (tag) => (JSON.parse(await b.cli('token', 'create', '--tag', tag, '--json')) as { token: string }).token),
    ]);
    b.startAgent(c);
    b.agents.forEach((a, k) => b.startAgent(a, ['--token', tokens[k]!]));
    const attached = new Map<Node, number>();
    const mesh = new Map<Node, string>();

    await t.test('each node configures exactly the peers its view holds, with the keys the controller handed out', async (t) => {
      t.equal(b.genesis.plan.privateNetwork.kind, 'tunnel', 'genesis chose the tunnel: no --private-interface was given');
      for (const n of all) attached.set(n, Number((await n.proc!.waitFor((l) => l.msg === 'tunnel attached', 90_000)).pid));
      t.pass("the control-node's agent raised the tunnel from genesis's choice, without --tunnel");
      const key = new Map(all.map((n) => [n, keyOf(n)]));
      const want: [Node, Node[]][] = [
        [c, [a1, a2, a3]],
        [a1, [c, a2]],
        [a2, [c, a1, a3]],
        [a3, [c, a2]],
      ];
      for (const [n, peers] of want) {
        const keys = JSON.stringify(peers.map((p) => key.get(p)).sort());
        await until(`${n.name}'s peers`, async () => JSON.stringify([...(await wgPeers(n)).keys()].sort()) === keys, 40);
        t.pass(`${n.name} holds ${peers.map((p) => p.name).join(', ')}`);
      }
      for (const n of all) mesh.set(n, await meshAddress(n));
      t.ok(
        [...mesh.values()].every((x) => x.startsWith('100.96.')),
        'mesh addresses from the private range',
      );
    });

    await t.test("the converged control-node: its derived filter lets the tunnel's UDP port in; its tunnel went through the flip", async (t) => {
      await c.proc!.waitFor((l) => l.msg === 'lifecycle' && l.state === 'converged', 60_000);
      // The firewall plugin genesis found there (Docker's iptables-nft, or nftables): both listings.
      const ruleset = (await c.ns.exec('nft', ['list', 'ruleset'])).stdout + (await c.ns.exec('iptables-nft-save', []).catch(() => ({ stdout: '' }))).stdout;
      t.ok(ruleset.includes('meshp:tunnel/incoming/udp/51820'), "the tunnel's port opened in the derived filter");
      t.ok(ruleset.includes('meshp:control/incoming/tcp/7443'), 'the control port too');
      t.equal(wgPid(c), attached.get(c), 'the same wireguard-go as before the flip');
      t.ok(alive(wgPid(c)), 'still running');
      for (const a of b.agents) {
        await until(`${a.name}'s handshake with m1`, async () => ((await wgPeers(a)).get(keyOf(c)) ?? 0) > 0, 20);
      }
      t.pass('every agent has a WireGuard session with the converged control-node');
    });

    await t.test('TCP over the tunnel: every pair the policy allows reaches, no other', async (t) => {
      const allowed: [Node, Node][] = [
        [a1, a2],
        [a2, a1],
        [a3, a2],
      ];
      const denied: [Node, Node, string][] = [
        [a1, a3, 'no rule either way'],
        [a3, a1, 'no rule either way'],
        [a2, a3, 'a3 may reach a2, not the other way'],
      ];
      for (const [f, to] of allowed) t.ok(await reachesSoon(f.ns, mesh.get(to)!, PORT), `${f.name} → ${to.name}:${PORT}`);
      const no = await Promise.all([
        ...denied.map(([f, to]) => reaches(f.ns, mesh.get(to)!, PORT)),
        ...allowed.map(([f, to]) => reaches(f.ns, mesh.get(to)!, OTHER_PORT)),
      ]);
      denied.forEach(([f, to, why], i) => t.notOk(no[i], `${f.name} ↛ ${to.name} (${why})`));
      allowed.forEach(([f, to], i) => t.notOk(no[denied.length + i], `${f.name} ↛ ${to.name}:${OTHER_PORT} (no rule names it)`));
    });

    await t.test('the store answers over the tunnel, not from outside; the control port is the one door on the underlay', async (t) => {
      const m1 = mesh.get(c)!;
      for (const a of b.agents) {
        t.ok(await reachesSoon(a.ns, m1, STORE), `${a.name} → the store over the tunnel`);
        t.ok(
          await reachesSoon(a.ns, m1, 7443),
          `${a.name} → control over the tunnel (a foundation port; ${a === a1 ? 'the policy names only 9/tcp' : 'no rule names the control-node'})`,
        );
      }
      const [store, bus, registry, control, underlay] = await Promise.all([
        reaches(b.outside, CONTROL_IP, STORE),
        reaches(b.outside, CONTROL_IP, 14222),
        reaches(b.outside, CONTROL_IP, 15000),
        reaches(b.outside, CONTROL_IP, 7443),
        reaches(a1.ns, CONTROL_IP, STORE),
      ]);
      t.notOk(store, 'outside ↛ the store');
      t.notOk(bus, 'outside ↛ the bus');
      t.notOk(registry, 'outside ↛ the registry');
      t.ok(control, 'outside → the control port (enrolment: tokens are the gate)');
      t.notOk(underlay, 'an enrolled node ↛ the store over the underlay either');
    });

    await t.test('a3 was told no endpoint: its peers reach it where the controller saw its stream come from', async (t) => {
      const db = new Database(join(b.ctlState, 'controller.db'), { readonly: true, fileMustExist: true });
      const doc = (id: string) =>
        JSON.parse((db.prepare('SELECT doc FROM members WHERE id = ?').get(id) as { doc: string }).doc) as { endpoints: string[]; observedEndpoint?: string };
      const [r1, r3] = [doc('a1'), doc('a3')];
      db.close();
      t.same(r3.endpoints, [], 'a3 enrolled with no endpoint');
      t.equal(r3.observedEndpoint, '10.97.0.3:51820', 'the controller recorded its source address on its tunnel port');
      t.same(r1.endpoints, ['10.97.0.1:51820'], 'a1 was told its endpoint');
      t.equal((await wgEndpoints(a2)).get(keyOf(a3)), '10.97.0.3:51820', "a2's interface reaches a3 there");
    });

    await t.test(
      "a policy flap: a1 ↔ a2 blocked at once, the peer and its session kept; then an empty policy: every agent still reaches the control-node's store and control, no other agent; restored, the same sessions carry",
      async (t) => {
        const before = (await wgPeers(a1)).get(keyOf(a2))!;
        await b.policy(rules.filter((r) => !(r.from === 'x' && r.to === 'y') && !(r.from === 'y' && r.to === 'x')));
        const t0 = Date.now();
        await until('a1 ↛ a2', async () => !(await reaches(a1.ns, mesh.get(a2)!, PORT)), 20, 50);
        t.comment(`a1 → a2 blocked ${Date.now() - t0} ms after the policy was set (a probe takes up to 1 s)`);
        t.pass('a1 ↛ a2');
        const during = (await wgPeers(a1)).get(keyOf(a2));
        t.ok(during !== undefined && during > 0, "a2's peer and its handshake are still on a1's interface (grace)");
        t.ok(await reachesSoon(a3.ns, mesh.get(a2)!, PORT), 'a3 → a2 unaffected');

        // No rule at all (a1's rule to the control-node gone too): the mesh's own rule keeps m1 in every view.
        const m1 = mesh.get(c)!;
        const held = await Promise.all(b.agents.map(async (a) => (await wgPeers(a)).get(keyOf(c)) ?? 0));
        await b.policy([]);
        const pairs: [Node, Node][] = b.agents.flatMap((f) => b.agents.filter((to) => to !== f).map((to): [Node, Node] => [f, to]));
        await until(
          'no agent reaches another',
          async () => !(await Promise.all(pairs.map(([f, to]) => reaches(f.ns, mesh.get(to)!, PORT)))).some(Boolean),
          20,
          50,
        );
        t.pass('an empty policy: no agent reaches another (a3 → a2 no longer either)');
        for (const a of b.agents) {
          t.ok(await reachesSoon(a.ns, m1, STORE, 5), `${a.name} → the store over the tunnel, with no rule at all`);
          t.ok(await reachesSoon(a.ns, m1, 7443, 5), `${a.name} → control over the tunnel`);
        }
        const now = await Promise.all(b.agents.map(async (a) => (await wgPeers(a)).get(keyOf(c))));
        // An UNSCOPED m1 would be blocked (no store above); a REMOVED one gone, or back with a new handshake.
        b.agents.forEach((a, i) =>
          t.ok(
            now[i] !== undefined && (now[i] === held[i] || now[i]! - held[i]! >= 120),
            `${a.name} holds m1's peer and its session (handshakes at ${held[i]} and ${now[i]})`,
          ),
        );
        const [outside, toA1, toA3] = await Promise.all([
          reaches(b.outside, CONTROL_IP, STORE),
          reaches(c.ns, mesh.get(a1)!, PORT),
          reaches(c.ns, mesh.get(a3)!, PORT),
        ]);
        t.notOk(outside, 'outside ↛ the store');
        t.notOk(toA1, 'm1 ↛ a1: the control-node holds members inbound only, it opens no connection to them');
        t.notOk(toA3, 'm1 ↛ a3');

        await b.policy(rules);
        t.ok(await reachesSoon(a1.ns, mesh.get(a2)!, PORT, 20), 'restored: a1 → a2');
        const after = (await wgPeers(a1)).get(keyOf(a2))!;
        // WireGuard itself re-keys a session 120 s after its handshake; a peer torn down and set up again would shake hands at once.
        t.ok(
          after === during || after - during! >= 120,
          `no handshake made by the flap (handshakes at ${during} and ${after}, the one before the flap at ${before})`,
        );
      },
    );

    await t.test('a controller restart tears no tunnel down: traffic flows while it is away, the peers are the same after', async (t) => {
      const pids = all.map(wgPid);
      const peers = await Promise.all(all.map(async (n) => [...(await wgPeers(n)).keys()].sort().join()));
      b.ctl.kill('SIGTERM');
      await b.ctl.exited;
      t.ok(await reachesSoon(a1.ns, mesh.get(a2)!, PORT, 5), 'a1 → a2 with the controller down');
      t.ok(await reachesSoon(a3.ns, mesh.get(c)!, STORE, 5), 'a3 → the store with the controller down');
      const mark = Date.now();
      await b.startController();
      for (const n of all) await b.ctl.waitFor((l) => l.msg === 'sync stream opened' && l.node === n.name, 60_000);
      t.comment(`the four agents back on their streams ${Date.now() - mark} ms after the controller started`);
      t.same(all.map(wgPid), pids, 'every wireguard-go is the one from before');
      t.same(await Promise.all(all.map(async (n) => [...(await wgPeers(n)).keys()].sort().join())), peers, 'every interface holds the same peers');
      t.ok(await reachesSoon(a1.ns, mesh.get(a2)!, PORT, 5), 'a1 → a2');
    });

    await t.test('an agent restart tears no tunnel down: wireguard-go carries traffic while the agent is away, and is adopted again', async (t) => {
      const pid = wgPid(a1);
      const peers = [...(await wgPeers(a1)).keys()].sort();
      a1.proc!.kill('SIGTERM');
      await a1.proc!.exited;
      t.ok(alive(pid), "wireguard-go outlives the agent's stop");
      t.ok(await reachesSoon(a1.ns, mesh.get(a2)!, PORT, 5), 'a1 → a2 with its agent stopped');
      const p = b.startAgent(a1);
      const line = await p.waitFor((l) => l.msg === 'tunnel attached', 60_000);
      t.equal(Number(line.pid), pid, 'the restarted agent adopted the running wireguard-go');
      t.equal(line.adopted, true);
      t.same([...(await wgPeers(a1)).keys()].sort(), peers, 'the same peers');
      t.ok(await reachesSoon(a1.ns, mesh.get(a2)!, PORT, 5), 'a1 → a2');
    });

    await t.test('a1 restarted with a new key: a2 and m1 swap it in, traffic resumes', async (t) => {
      const old = keyOf(a1);
      a1.proc!.kill('SIGTERM');
      await a1.proc!.exited;
      rmSync(join(a1.state, 'wireguard', `${a1.ifname}.key`));
      b.startAgent(a1);
      await a1.proc!.waitFor((l) => l.msg === 'tunnel attached', 60_000);
      const fresh = keyOf(a1);
      t.not(fresh, old, 'a new key in the state folder');
      for (const n of [a2, c]) {
        await until(
          `${n.name} swaps a1's key`,
          async () => {
            const keys = await wgPeers(n);
            return keys.has(fresh) && !keys.has(old);
          },
          30,
        );
        t.pass(`${n.name} holds a1's new key and not the old one`);
      }
      t.ok(await reachesSoon(a1.ns, mesh.get(a2)!, PORT), 'a1 → a2 with the new key');
    });

    await t.test('node remove a3: its peer leaves every interface; with its old keys it reaches no one', async (t) => {
      const k3 = keyOf(a3);
      const mark = b.ctl.lines.length;
      const removing = b.cli('node', 'remove', 'a3', '--yes');
      const removedAt = Number((await b.ctl.waitFor((l) => l.msg === 'node removed: credential and key revoked', 60_000, mark)).time);
      const gone = await Promise.all(
        [a2, c, a1].map(async (n) => {
          await until(`${n.name} drops a3's key`, async () => !(await wgPeers(n)).has(k3), 15, 50);
          return Date.now() - removedAt;
        }),
      );
      await removing;
      t.pass("a3's peer is gone from a2 and m1 (a1 never had it)");
      t.comment(`a3's peer seen gone by \`wg show\` (polled) ${gone.slice(0, 2).join(' and ')} ms after the controller removed it (a2, m1)`);
      const [toA2, toStore] = await Promise.all([reaches(a3.ns, mesh.get(a2)!, PORT), reaches(a3.ns, mesh.get(c)!, STORE)]);
      t.notOk(toA2, 'a3 ↛ a2');
      t.notOk(toStore, 'a3 ↛ the store');
      t.ok(await reachesSoon(a1.ns, mesh.get(a2)!, PORT, 5), 'a1 → a2 still');
    });
    t.comment(`lab run: ${Date.now() - started} ms`);
  },
);

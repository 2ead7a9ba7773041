/**
 * Issue 28 (ADR 0041) over a real tunnel: the mesh bed (genesis on the control-node, agents over the
 * underlay, wireguard-go), namespaces prefixed `exp`. A node whose credential expires (a short
 * renewal, reached by the controller's clock, not by a command) has its TCP to a peer dropped by that
 * peer within a second of the expiry, in idle-machine time (budget.ts: stretched by the load); renewed
 * by the admin, it flows again; after `meshp node rekey` the node speaks with its new key and its
 * peers handshake with it.
 */
import t from 'tap';
import { workdir } from '../../helpers/grpc-procs.js';
import { labAvailable } from '../../helpers/netns.js';
import { fileBudget, loadFactor, until } from '../../helpers/budget.js';
import { PORT, keyOf, meshAddress, meshBed, reaches, reachesSoon, wgPeers, type Node } from './mesh-bed.js';

fileBudget(300);

t.test(
  "an expired node's traffic is dropped by its peers; renewed, it flows; rekeyed, its peers handshake with the new key",
  { skip: labAvailable() ? false : 'needs root for namespaces, Docker and wireguard-go (CI runs it as root)' },
  async (t) => {
    const b = await meshBed(t, workdir(t, 'expmesh'), 2, 'exp');
    const [a1, a2] = b.agents as [Node, Node];
    await b.policy([
      { from: 'x', to: 'y', ports: [`${PORT}/tcp`] },
      { from: 'y', to: 'x', ports: [`${PORT}/tcp`] },
    ]);
    const tokens = await Promise.all(
      ['x', 'y'].map(async (tag) => (JSON.parse(await b.cli('token', 'create', '--tag', tag, '--json')) as { token: string }).token),
    );
    b.startAgent(b.c);
    b.agents.forEach((a, k) => b.startAgent(a, ['--token', tokens[k]!]));
    for (const n of [b.c, a1, a2]) await n.proc!.waitFor((l) => l.msg === 'tunnel attached', 120_000);
    const m2 = await until("a2's mesh address", () => meshAddress(a2).catch(() => ''), 60);
    t.ok(await reachesSoon(a1.ns, m2, PORT, 60), 'a1 reaches a2 over the tunnel');

    await t.test('expired by the clock: a2 drops a1 within a second of the expiry; renewed, it flows again', async (t) => {
      // A term of 20 s: its agent renews when a third is left; the network's lifetime is 180 days, so
      // the agent's renewal would keep it in. It is stopped first: the controller's clock expires it.
      const renewed = JSON.parse(await b.cli('node', 'renew', 'a1', '--for', '20s', '--yes', '--json')) as { expiresAt: string };
      const end = Date.parse(renewed.expiresAt);
      a1.proc!.kill('SIGSTOP');
      t.teardown(() => a1.proc!.kill('SIGCONT'));
      t.ok(await reaches(a1.ns, m2, PORT), 'before the expiry a1 reaches a2 (its stopped agent leaves its tunnel as it is)');
      await until('the expiry', () => Date.now() >= end - 300, 60, 50);
      // From the expiry on: the first probe that is not answered says when a2 dropped a1.
      let droppedAt = 0;
      await until(
        'a2 dropping a1',
        async () => {
          const at = Date.now();
          if (await reaches(a1.ns, m2, PORT)) return false;
          droppedAt = at;
          return true;
        },
        10,
        50,
      );
      const late = droppedAt - end;
      t.comment(`dropped ${late} ms after the expiry (load factor ${loadFactor().toFixed(1)})`);
      t.ok(late <= 1_000 * loadFactor(), `dropped within a second of the expiry, in idle-machine time (${late} ms)`);
      const shown = JSON.parse(await b.cli('node', 'show', 'a1', '--json')) as { node: { expired: boolean; status: string } };
      t.same([shown.node.expired, shown.node.status], [true, 'expired'], 'shown expired');
      t.notOk([...(await wgPeers(a2)).keys()].includes(keyOf(a1)), "a1's key is off a2's interface: its allowed IPs dropped");
      a1.proc!.kill('SIGCONT');
      await a1.proc!.waitFor((l) => l.code === 'MESHP_NODE_EXPIRED', 60_000);
      t.pass("a1's agent, running again, is refused MESHP_NODE_EXPIRED");
      await b.cli('node', 'renew', 'a1', '--yes');
      t.ok(await reachesSoon(a1.ns, m2, PORT, 60), 'renewed: a1 reaches a2 again, without a token');
    });

    await t.test("rekey: a2's agent makes a new key; a1 handshakes with it", async (t) => {
      const before = keyOf(a2);
      const r = JSON.parse(await b.cli('node', 'rekey', 'a2', '--yes', '--json')) as { tunnelKeyBefore: string; tunnelKey: string };
      t.equal(r.tunnelKeyBefore, before);
      t.not(r.tunnelKey, before, 'a new key');
      t.equal(keyOf(a2), r.tunnelKey, "a2's key file holds the new key");
      const shown = await a2.ns.exec('wg', ['show', a2.ifname, 'public-key']);
      t.equal(shown.stdout.trim(), r.tunnelKey, "a2's interface speaks with it");
      await until("a1's interface holding a2's new key", async () => (await wgPeers(a1)).has(r.tunnelKey) && !(await wgPeers(a1)).has(before), 60);
      t.pass("a1 holds a2's new key, not the old one");
      t.ok(await reachesSoon(a1.ns, m2, PORT, 60), 'a1 reaches a2 with the new key');
      await until('a handshake with the new key', async () => ((await wgPeers(a1)).get(r.tunnelKey) ?? 0) > 0, 60);
      t.pass('a1 handshaked with the new key');
    });
  },
);

/**
 * The fan-out never blocks (issue 15): the real SessionHub and Controller, 250 authenticated
 * streams over an in-memory channel (each a DeltaApplier that acks what it applies, as an agent
 * does). A change seen by all of them is fanned out in chunks that yield to the event loop: the call
 * that made it returns before any delta is sent, an admin call made during the fan-out is answered
 * before it ends, and two quick changes reach a node as one delta.
 */
import t from 'tap';
import type { Subtest as Tap } from '../helpers/tap-types.js';
import { generateKeyPairSync } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AuthStore, Controller, Enrolment, MemoryStore, Metrics, SessionHub, SyncSession, adminHandler, createLogger } from '@meshp/controller';
import { SyncRecords } from '@meshp/core/delta';
import { MemoryStream } from '../helpers/memory-stream.js';

const N = 250;
const NET = 'default';

/** The real hub and controller with `n` authenticated in-memory streams, node i tagged by `tagOf(i)`. */
async function bed(t: Tap, n: number, rules: { from: string; to: string }[], tagOf: (i: number) => string) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-fanout-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const controller = new Controller(new MemoryStore());
  controller.createNetwork(NET);
  controller.setPolicy(NET, rules);
  const auth = new AuthStore(join(dir, 'auth.db'));
  t.teardown(() => auth.close());
  const log = createLogger('fanout-test', 'silent');
  const metrics = new Metrics();
  const hub = new SessionHub(controller, auth, metrics, log);
  t.teardown(() => hub.closeAll());
  const streams: MemoryStream[] = [];
  for (let i = 0; i < n; i++) {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const id = `n${i}`;
    controller.join(NET, { id, nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), tags: [tagOf(i)] });
    auth.putCredential(`cred-${id}`, NET, id);
    const s = new MemoryStream(id, `cred-${id}`, privateKey);
    streams.push(s);
    hub.open(s, `peer-${i}`);
  }
  const top = () => controller.stateVersion(NET);
  /** Until the fan-out is done and every stream's node is at gap 0 (the node list read only then: it costs). */
  const settled = async () => {
    const streamed = new Set(streams.map((s) => s.node));
    for (let i = 0; i < 200; i++) {
      await hub.fanout.idle();
      await new Promise((r) => setTimeout(r, 5));
      if (hub.fanout.pending === 0 && controller.listNodes(NET).every((x) => !streamed.has(x.name) || x.gap === 0)) return;
    }
  };
  await settled();
  return { controller, auth, log, metrics, hub, streams, top, settled };
}

t.test(`a change seen by ${N} streams: answered first, fanned out in chunks, coalesced`, async (t) => {
  const { controller, auth, log, metrics, hub, streams, top, settled } = await bed(t, N, [{ from: 'all', to: 'all' }], () => 'all');
  const admin = adminHandler({
    controller,
    enrolment: new Enrolment(controller, auth, 'f'.repeat(64)),
    secret: 'admin-secret',
    metrics,
    log,
    reports: () => null,
    changed: (n) => hub.poke(n),
    live: (n, id) => hub.live(n, id),
  });
  t.ok(
    streams.every((s) => s.applier.appliedVersion === top()),
    `${N} streams snapshotted at version ${top()}`,
  );
  for (const s of streams) s.deltas = [];

  // A join every stream sees, made through the admin surface's way of saying "changed".
  const turnsBefore = hub.fanout.turns;
  controller.join(NET, { id: 'late', nodeKey: 'late-key', tags: ['all'] });
  hub.poke(NET);
  t.equal(streams.filter((s) => s.deltas.length > 0).length, 0, 'the call that made the change returns before any delta is sent');
  t.equal(hub.fanout.pending, N, 'every stream is queued');

  // An admin call arriving during the fan-out.
  const answered = await new Promise<{ delivered: number; nodes: number }>((resolve) => {
    setImmediate(() => {
      void admin('listNodes', { network: NET }, 'admin-secret', 'operator').then((r) => {
        resolve({ delivered: streams.filter((s) => s.deltas.length > 0).length, nodes: (r as { nodes: unknown[] }).nodes.length });
      });
    });
  });
  t.equal(answered.nodes, N + 1, 'the admin call was answered');
  t.ok(answered.delivered < N, `the admin call was answered before the fan-out ended (${answered.delivered} of ${N} streams sent their delta by then)`);
  await settled();
  t.ok(hub.fanout.turns - turnsBefore > 1, `the fan-out took ${hub.fanout.turns - turnsBefore} turns of the event loop, not one`);
  t.ok(
    streams.every((s) => s.deltas.length === 1 && s.deltas[0]!.upsertPeers.some((p) => p.id === 'late')),
    'each stream got one delta with the new peer',
  );
  t.ok(
    streams.every((s) => s.applier.appliedVersion === top()),
    'and acked it',
  );

  // Two quick changes to one node's view (two tags for n1, seen by n0 too) before its turn: one delta each.
  for (const s of streams) s.deltas = [];
  const from = top();
  controller.setTags(NET, 'n1', ['all', 'x']);
  hub.poke(NET);
  controller.setTags(NET, 'n1', ['all', 'x', 'y']);
  hub.poke(NET);
  await settled();
  const n0 = streams[0]!;
  t.equal(n0.deltas.length, 1, 'two changes, one delta to n0');
  t.same([n0.deltas[0]!.fromVersion, n0.deltas[0]!.toVersion], [from, from + 2], 'spanning both versions');
  t.same(n0.deltas[0]!.upsertPeers.find((p) => p.id === 'n1')?.tags, ['all', 'x', 'y'], 'with the peer as it is after both');
  t.ok(
    streams.every((s) => s.deltas.length <= 1),
    `at most one delta per stream for two changes (${streams.reduce((k, s) => k + s.deltas.length, 0)} in all, not ${2 * N})`,
  );
});

t.test('the fan-out pumps only the streams a change concerns, found through the indexes', async (t) => {
  const G = 8;
  const SIZE = 25;
  const rules = Array.from({ length: G }, (_, g) => ({ from: `g${g}`, to: `g${g}` }));
  const { controller, hub, streams, top, settled } = await bed(t, G * SIZE, rules, (i) => `g${i % G}`);
  t.ok(
    streams.every((s) => s.applier.appliedVersion > 0),
    `${G * SIZE} streams snapshotted`,
  );
  hub.poke(NET); // the hub's first fan-out covers everyone: from here on, only what changes concern
  await settled();
  const queued = (change: () => void): number => {
    for (const s of streams) s.deltas = [];
    change();
    hub.poke(NET);
    return hub.fanout.pending;
  };
  let k = queued(() => controller.join(NET, { id: 'late', nodeKey: 'late-key', tags: ['g0'] }));
  t.equal(k, SIZE, `a join in group 0 queues its ${SIZE} members' streams, not ${G * SIZE}`);
  await settled();
  t.same(
    streams.filter((s) => s.deltas.length > 0).map((s) => s.applier.view.peer('late') !== undefined),
    Array(SIZE).fill(true),
    'and those got the new peer',
  );

  k = queued(() =>
    controller.setPolicy(
      NET,
      rules.map((r, g) => (g === 3 ? { ...r, ports: ['443'] } : r)),
    ),
  );
  t.equal(k, SIZE, `a policy change of group 3 queues its ${SIZE} streams`);
  await settled();
  t.equal(streams.filter((s) => s.deltas.length > 0).length, SIZE, 'and those got their new filter');

  k = queued(() => controller.leave(NET, 'n8'));
  t.equal(k, SIZE, `a removal in group 0 queues its ${SIZE} members' streams (its own ends)`);
  await settled();
  t.equal(streams.filter((s) => s.deltas.some((d) => d.removePeers.some((r) => r.id === 'n8'))).length, SIZE - 1, 'and the others of group 0 were told');

  k = queued(() => controller.setTags(NET, 'n1', ['g1', 'g2']));
  t.equal(k, 2 * SIZE, 'a node that joins a second group: the members of both (itself included)');
  await settled();
  t.ok(
    controller.listNodes(NET).every((n) => n.name === 'late' || n.gap === 0),
    `every node with a stream at gap 0 at version ${top()}`,
  );

  // A short log: changes that do not concern group 0 go past its depth; group 0's next change is still a delta.
  controller.setLogDepth(NET, 2);
  // (Not through settled(): reading the node list brings every basis up to date, which would hide this.)
  const quiet = async () => {
    await hub.fanout.idle();
    for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
  };
  for (let i = 0; i < 4; i++) {
    queued(() => controller.setTags(NET, 'n3', ['g3', `x${i}`]));
    await quiet();
  }
  queued(() => controller.setTags(NET, 'n0', ['g0', 'y']));
  await settled();
  const g0 = streams.filter((_, i) => i % G === 0 && i !== 8 && i !== 0);
  t.ok(
    g0.every((s) => s.deltas.length === 1 && s.deltas[0]!.fromVersion > 0),
    `group 0's ${g0.length} other streams got a delta, not a snapshot, past the log's depth of unconcerned changes`,
  );
  t.ok(
    streams.every((s) => s.deltas.every((d) => d.fromVersion > 0)),
    'no snapshot anywhere',
  );
  const views = streams.map((s, i) => i === 8 || s.applier.view.hash() === controller.snapshotOf(NET, `n${i}`).hash);
  t.ok(views.every(Boolean), 'every view built by deltas equals the snapshot of the same version');
});

/**
 * Issue 15's goal, counted rather than timed: a change that concerns k nodes reads O(k) sync records
 * and pumps O(k) streams, whatever the size of the network. The same changes (a join, a policy
 * change, a removal, all in group 0 of groups of 10) at 4 groups and at 16 do the same work; before,
 * every change moved the basis of every other stream (a read of each record: 4 times as many at 16).
 */
t.test("a change's work depends on the nodes it concerns, not on the network's size", async (t) => {
  const SIZE = 10;
  const work = { reads: 0, pumps: 0 };
  const get = SyncRecords.prototype.get;
  const pump = SyncSession.prototype.pump;
  const iterate = SyncRecords.prototype[Symbol.iterator];
  SyncRecords.prototype.get = function (this: SyncRecords, id: string) {
    work.reads++;
    return get.call(this, id);
  };
  SyncRecords.prototype[Symbol.iterator] = function (this: SyncRecords) {
    work.reads += this.size;
    return iterate.call(this);
  };
  SyncSession.prototype.pump = function (this: SyncSession) {
    work.pumps++;
    return pump.call(this);
  };
  t.teardown(() => {
    SyncRecords.prototype.get = get;
    SyncRecords.prototype[Symbol.iterator] = iterate;
    SyncSession.prototype.pump = pump;
  });
  const measure = async (groups: number) => {
    const rules = Array.from({ length: groups }, (_, g) => ({ from: `g${g}`, to: `g${g}` }));
    const { controller, hub, streams, settled } = await bed(t, groups * SIZE, rules, (i) => `g${Math.floor(i / SIZE)}`);
    hub.poke(NET); // the hub's first fan-out covers everyone: from here on, only what changes concern
    await settled();
    // Until the fan-out is done and the acks are in (not through settled(): a node list reads every record).
    const quiet = async () => {
      for (let i = 0; i < 5; i++) {
        await hub.fanout.idle();
        for (let j = 0; j < 5; j++) await new Promise((r) => setImmediate(r));
      }
    };
    const counted = async (change: () => void) => {
      for (const s of streams) s.deltas = [];
      work.reads = 0;
      work.pumps = 0;
      change();
      hub.poke(NET);
      await quiet();
      return { ...work, deltas: streams.reduce((k, s) => k + s.deltas.length, 0) };
    };
    const out = {
      join: await counted(() => controller.join(NET, { id: 'late', nodeKey: 'late-key', tags: ['g0'] })),
      policy: await counted(() =>
        controller.setPolicy(
          NET,
          rules.map((r, g) => (g === 0 ? { ...r, ports: ['443'] } : r)),
        ),
      ),
      removal: await counted(() => controller.leave(NET, 'n1')),
    };
    // The gaps read back are exact: a node with no stream is behind after a change that concerns it, and only then.
    const [g0, g1] = [streams[2]!, streams[SIZE + 2]!];
    g0.close();
    g1.close();
    await quiet();
    controller.setTags(NET, 'n3', ['g0', 'z']);
    hub.poke(NET);
    await quiet();
    const gaps = new Map(controller.listNodes(NET).map((n) => [n.name, n.gap]));
    t.ok(gaps.get(g0.node)! > 0, `at ${groups * SIZE} nodes: ${g0.node} (group 0, no stream) is behind after a change to group 0`);
    t.equal(gaps.get(g1.node), 0, `at ${groups * SIZE} nodes: ${g1.node} (group 1, no stream) is not`);
    t.ok(
      [...gaps].every(([id, gap]) => id === g0.node || id === 'late' || gap === 0),
      'every other node is at gap 0',
    );
    hub.closeAll();
    return out;
  };
  const small = await measure(4);
  const large = await measure(16);
  for (const name of ['join', 'policy', 'removal'] as const) {
    t.ok(small[name].deltas > 0 && small[name].deltas <= SIZE + 1, `${name}: ${small[name].deltas} deltas for a group of ${SIZE}`);
    t.same(large[name], small[name], `${name}: the same work at 160 nodes as at 40 (${JSON.stringify(small[name])})`);
  }
});

/**
 * A controller upgraded in place (issue 16): its store was written when the control-node was in a
 * member's view only if a policy rule said so. No log entry makes the difference, so no delta can
 * carry it; the new controller checks each view once at load and snapshots those that differ, and
 * leaves the others (and itself, on the next restart) alone.
 */
import t from 'tap';
import { CONTROL_NODE_TAG, DeltaApplier, SCOPE_RULE } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';
import { syncNode } from '../helpers/controller-sync.js';

interface Serialised {
  networks: { name: string; scopeRule?: number }[];
  members: { network: string; member: { id: string; tags: string[] } }[];
}

const sync = (c: Controller, net: string, agent: DeltaApplier, node: string) => syncNode(c, agent, node, net)?.delta ?? null;

t.test('views computed under the old rule: those that differ get one snapshot, the others nothing', async (t) => {
  // The old world: m1 not yet tagged as the control-node, so x and y see no one (no policy).
  const old = new MemoryStore();
  const c0 = new Controller(old);
  c0.createNetwork('n', { privateRange: '10.61.0.0/16' });
  c0.createNetwork('quiet', { privateRange: '10.62.0.0/16' });
  for (const id of ['m1', 'x', 'y']) c0.join('n', { id, nodeKey: `k-${id}`, tags: [] });
  c0.join('quiet', { id: 'q', nodeKey: 'k-q', tags: [] });
  const agents = { m1: new DeltaApplier(), x: new DeltaApplier(), y: new DeltaApplier(), q: new DeltaApplier() };
  for (const id of ['m1', 'x', 'y'] as const) sync(c0, 'n', agents[id], id);
  sync(c0, 'quiet', agents.q, 'q');
  t.equal(agents.x.view.peers.size, 0, 'before: x sees no one');

  // What an older controller wrote: m1 carries the control-node tag, the records no scope rule.
  const s = JSON.parse(old.serialise()) as Serialised;
  for (const n of s.networks) delete n.scopeRule;
  for (const m of s.members) if (m.member.id === 'm1') m.member.tags = [CONTROL_NODE_TAG];
  const upgraded = MemoryStore.from(JSON.stringify(s));
  const c1 = new Controller(upgraded);

  for (const id of ['x', 'y'] as const) {
    const d = sync(c1, 'n', agents[id], id);
    t.ok(d && d.fromVersion === 0, `${id}: a snapshot`);
    t.ok(agents[id].view.peers.has('m1'), `${id} now holds the control-node`);
    t.equal(agents[id].view.hash(), c1.snapshotOf('n', id).hash, `${id}'s view is what the rule computes`);
  }
  t.ok(sync(c1, 'n', agents.m1, 'm1'), 'm1 (now holding every member) is brought up to date too');
  t.same([...agents.m1.view.peers.keys()].sort(), ['x', 'y']);
  t.equal(sync(c1, 'quiet', agents.q, 'q'), null, 'a network whose views did not change: nothing sent');

  const after = JSON.parse(upgraded.serialise()) as Serialised;
  t.same(
    after.networks.map((n) => n.scopeRule),
    [SCOPE_RULE, SCOPE_RULE],
    'the records now say the current rule',
  );
  const c2 = new Controller(MemoryStore.from(upgraded.serialise()));
  for (const id of ['m1', 'x', 'y'] as const) t.equal(c2.deltaFor('n', id), null, `restarted again: nothing for ${id}`);
});

t.test('a new network is written with the current rule', async (t) => {
  const store = new MemoryStore();
  new Controller(store).createNetwork('fresh');
  t.equal((JSON.parse(store.serialise()) as Serialised).networks[0]!.scopeRule, SCOPE_RULE);
});

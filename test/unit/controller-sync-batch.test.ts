/**
 * Acks are batched to the store (issue 15): with group commit, N acks (and the N deltas before them)
 * write nothing until the flush, which writes them in one transaction. A restart from the store as
 * it was before that flush loses the acks; each agent's hello says its version and hash again, and
 * an agent that was current resumes with no snapshot, at gap 0.
 */
import t from 'tap';
import { Controller, MemoryStore, type ControllerStore } from '@meshp/controller';
import { DeltaApplier } from '@meshp/core/delta';

const NET = 'n';
const N = 40;

/** The store, counting what reaches it. */
function counted(inner: MemoryStore): { store: ControllerStore; count: { transactions: number; putSync: number } } {
  const count = { transactions: 0, putSync: 0 };
  const store = new Proxy(inner, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      return (...args: unknown[]) => {
        if (prop === 'transaction') count.transactions++;
        if (prop === 'putSync') count.putSync++;
        return (v as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { store, count };
}

/** Sends and acks what the controller has for each node. */
function deliver(c: Controller, agents: Map<string, DeltaApplier>): number {
  let acks = 0;
  for (const [id, a] of agents) {
    for (let d = c.deltaFor(NET, id); d; d = c.deltaFor(NET, id)) {
      const r = a.receive(structuredClone(d));
      if (r.status === 'applied') {
        c.ack(NET, id, r.ack.appliedVersion, r.ack.stateHash);
        acks++;
      }
    }
  }
  return acks;
}

t.test(`${N} acks: no store write each, one group commit; a restart before it needs no snapshot`, async (t) => {
  const inner = new MemoryStore();
  const { store, count } = counted(inner);
  const c = new Controller(store, { syncFlushMs: 60_000 });
  c.createNetwork(NET);
  c.setPolicy(NET, [{ from: 'all', to: 'all' }]);
  const agents = new Map<string, DeltaApplier>();
  for (let i = 0; i < N; i++) {
    c.join(NET, { id: `m${i}`, nodeKey: `k${i}`, tags: ['all'] });
    agents.set(`m${i}`, new DeltaApplier());
  }
  deliver(c, agents);
  c.flushSync();

  // A change every node sees, sent and acked.
  const kept = inner.serialise();
  const before = { ...count };
  c.setTags(NET, 'm0', ['all', 'x']);
  const changeWrites = count.transactions - before.transactions;
  const acks = deliver(c, agents);
  t.equal(acks, N - 1, `${N - 1} acks (m0's own view did not change)`);
  t.equal(
    count.transactions - before.transactions,
    changeWrites,
    `the ${acks} deltas and ${acks} acks wrote nothing yet (only the change itself: ${changeWrites} transaction)`,
  );
  t.equal(count.putSync - before.putSync, 0, 'no sync record written per delta or per ack');
  const stale = inner.serialise(); // the store as a crash now would leave it
  const flushed = c.flushSync();
  t.equal(count.transactions - before.transactions, changeWrites + 1, 'one transaction for the flush');
  t.ok(flushed <= N, `${flushed} records in it, at most one per node`);
  t.not(stale, kept, 'the change itself was committed at once');

  // Restart from the store as it was before the flush: the acks are lost, the change is not.
  const again = new Controller(MemoryStore.from(stale), { syncFlushMs: 60_000 });
  t.equal(again.stateVersion(NET), c.stateVersion(NET), 'the change survived');
  const refused: string[] = [];
  const sent: string[] = [];
  for (const [id, a] of agents) {
    const h = a.hello();
    const r = again.hello(NET, id, h.appliedVersion, h.stateHash);
    if (!r.accepted || r.snapshotPending) refused.push(id);
    if (again.deltaFor(NET, id)) sent.push(id);
  }
  t.same(refused, [], 'every hello is its ack said again, accepted');
  t.same(sent, [], 'nothing to send to anyone: no snapshot');
  t.ok(
    again.listNodes(NET).every((n) => n.gap === 0),
    'every node at gap 0',
  );

  // An agent whose view is not the current one is not taken on its word.
  const liar = agents.get('m1')!.hello();
  const third = new Controller(MemoryStore.from(stale));
  t.equal(third.hello(NET, 'm1', liar.appliedVersion, 'f'.repeat(64)).snapshotPending, true, 'another hash: a snapshot');
});

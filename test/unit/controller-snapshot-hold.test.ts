/**
 * A snapshot held back by the resync backoff is never left without a time to go. The stream's pump
 * asks `deltaFor` (nothing yet: the hold has not run out) and then `snapshotHold` (when to pump
 * again); the clock moves between the two reads. Seen in grpc-hardening on a loaded machine: the
 * backoff timer fired a moment before the hold ran out, `deltaFor` sent nothing, the hold had run
 * out by the time `snapshotHold` read the clock, it answered "no time, not diverged", no timer was
 * set, and the agent never got its snapshot (nor was it marked diverged).
 */
import t from 'tap';
import { DeltaApplier } from '@meshp/core/delta';
import { Controller, MemoryStore } from '@meshp/controller';

t.test('a hold that runs out between deltaFor and snapshotHold still has a time', async (t) => {
  let now = Date.parse('2026-12-01T10:00:00.000Z');
  const c = new Controller(new MemoryStore(), { now: () => new Date(now).toISOString() });
  c.createNetwork('n', { privateRange: '10.61.0.0/16' });
  c.join('n', { id: 'liar', nodeKey: 'k1', tags: ['a'] });
  const agent = new DeltaApplier();
  const lie = () => {
    const d = c.deltaFor('n', 'liar');
    t.ok(d, 'a snapshot goes');
    const r = agent.receive(structuredClone(d!));
    if (r.status !== 'applied') throw new Error('not applied');
    return c.ack('n', 'liar', r.ack.appliedVersion, 'not-the-hash');
  };
  c.hello('n', 'liar', 0, agent.view.hash()); // the first snapshot asked for: it goes at once
  lie(); // the second in a row: held back by the backoff (1 s)
  const held = c.snapshotHold('n', 'liar');
  t.equal(held.diverged, null);
  t.ok(held.retryAt !== null && held.retryAt > now, 'held: a time in the future');
  const until = held.retryAt!;

  now = until - 1; // the timer fired a millisecond early
  t.equal(c.deltaFor('n', 'liar'), null, 'deltaFor: not yet');
  now = until; // …and the hold ran out before snapshotHold read the clock
  const after = c.snapshotHold('n', 'liar');
  t.not(after.retryAt, null, 'still a time to pump again (was null: no timer, no snapshot, not diverged)');
  t.ok(after.retryAt! <= now, 'a time already come: pump at once');
  t.ok(c.deltaFor('n', 'liar'), 'and then the snapshot goes');
});

t.test('nothing pending, or diverged: no time', async (t) => {
  let now = Date.parse('2026-12-01T10:00:00.000Z');
  const c = new Controller(new MemoryStore(), { now: () => new Date(now).toISOString(), resync: { baseMs: 1_000, max: 2 } });
  c.createNetwork('n', { privateRange: '10.61.0.0/16' });
  c.join('n', { id: 'x', nodeKey: 'k1' });
  const agent = new DeltaApplier();
  c.hello('n', 'x', 0, agent.view.hash());
  const d = c.deltaFor('n', 'x')!;
  const r = agent.receive(structuredClone(d));
  if (r.status !== 'applied') throw new Error('not applied');
  c.ack('n', 'x', r.ack.appliedVersion, r.ack.stateHash);
  t.same(c.snapshotHold('n', 'x'), { retryAt: null, diverged: null }, 'acked with the hash expected: nothing held');
  // Then lies until diverged (max 2 snapshots in a row), the clock moving past every hold.
  c.ack('n', 'x', r.ack.appliedVersion, 'not-the-hash');
  t.not(c.snapshotHold('n', 'x').retryAt, null, 'a lie: a snapshot pending, with a time');
  for (let i = 0; i < 6; i++) {
    now += 60_000;
    const next = c.deltaFor('n', 'x');
    if (!next) break;
    const a = agent.receive(structuredClone(next));
    if (a.status !== 'applied') throw new Error('not applied');
    c.ack('n', 'x', a.ack.appliedVersion, 'not-the-hash');
  }
  const hold = c.snapshotHold('n', 'x');
  t.match(hold.diverged, /^MESHP_DIVERGED: /, 'diverged');
  t.equal(hold.retryAt, null, 'diverged: no time (nothing goes until a change or a matching hello)');
});

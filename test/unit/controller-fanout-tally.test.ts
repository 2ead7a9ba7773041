/**
 * Issue 31: the controller says one line per fan-out, not one per agent. The fan-out's queue tallies
 * what each pump sent per network, across its turns, and hands the tally over once, when it is empty.
 */
import t from 'tap';
import { FanOut, type FanOutTally, type Sent } from '../../plugins/controller/src/hosting/fanout.js';

const stream = (sent: Sent | undefined) => ({
  pumps: 0,
  pump() {
    this.pumps++;
    return sent;
  },
});

t.test('one tally per network when the queue is empty, over all its turns; what sent nothing is not counted', async (t) => {
  const done: FanOutTally[][] = [];
  const fan = new FanOut({ chunk: 2 }, (tallies) => done.push(tallies));
  const streams = [
    ...Array.from({ length: 5 }, (_, i) => stream({ network: 'a', toVersion: 7 + (i % 2), snapshot: i === 0 })),
    stream({ network: 'b', toVersion: 3, snapshot: false }),
    stream(undefined),
  ];
  fan.add(streams);
  await fan.idle();
  t.ok(fan.turns >= 4, `${fan.turns} turns`);
  t.ok(
    streams.every((s) => s.pumps === 1),
    'each stream pumped once',
  );
  t.same(
    done,
    [
      [
        { network: 'a', agents: 5, snapshots: 1, version: 8 },
        { network: 'b', agents: 1, snapshots: 0, version: 3 },
      ],
    ],
    'one call, a line per network: agents, snapshots, the highest version sent',
  );

  // The next fan-out starts its own tally; one where nothing was sent says nothing.
  fan.add([stream({ network: 'a', toVersion: 9, snapshot: false })]);
  await fan.idle();
  fan.add([stream(undefined)]);
  await fan.idle();
  t.same(done.slice(1), [[{ network: 'a', agents: 1, snapshots: 0, version: 9 }]]);
});

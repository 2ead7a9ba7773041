/**
 * The N-2 agent test of ADR 0001 (docs/adr/0001-incremental-lazily-scoped-deltas.md): a recorded stream of deltas, replayed through the decoder of
 * every kept proto revision, yields the same views and hashes; and a stream encoded by the current
 * code yields, through every kept decoder, the view the current decoder builds.
 * Only one revision exists yet: v1-r1 (frozen under v1-r1/: the .proto and its generated decoder).
 * When r2 is released, freeze it beside it and add it to REVISIONS; keep the last three.
 */
import t from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { StateDelta } from '@meshp/core';
import { DeltaApplier, protoCanonicalJson } from '@meshp/core/delta';
import { StateDelta as Current } from '@meshp/protocol';
import { StateDelta as V1R1 } from './v1-r1/control.js';
import { recordScenario } from './scenario.js';

interface Decoder {
  decode(bytes: Uint8Array): unknown;
}
const REVISIONS: Record<string, Decoder> = { 'v1-r1': V1R1 };
const STREAMS = join(process.cwd(), 'test/compat/streams');

interface Recorded {
  delta: string;
  status: string;
  appliedVersion?: number;
  stateHash?: string;
}

for (const file of readdirSync(STREAMS).filter((f) => f.endsWith('.jsonl'))) {
  const lines = readFileSync(join(STREAMS, file), 'utf8')
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Recorded);
  for (const [revision, decoder] of Object.entries({ current: Current, ...REVISIONS })) {
    t.test(`the stream recorded as ${file} replays through the ${revision} decoder to the recorded hashes`, async (t) => {
      const agent = new DeltaApplier();
      for (const [i, line] of lines.entries()) {
        const r = agent.receive(decoder.decode(Buffer.from(line.delta, 'base64')) as StateDelta);
        t.equal(r.status, line.status, `message ${i}: ${line.status}`);
        if (r.status === 'applied') t.same(r.ack, { appliedVersion: line.appliedVersion, stateHash: line.stateHash }, `message ${i}: version and hash`);
      }
      t.equal(agent.view.hash(), agent.view.recomputeHash());
    });
  }
}

t.test('a stream encoded by the current code builds the same view through every kept decoder', async (t) => {
  const current = new DeltaApplier();
  const old = Object.entries(REVISIONS).map(([revision, decoder]) => ({ revision, decoder, agent: new DeltaApplier() }));
  let messages = 0;
  recordScenario((d) => {
    const bytes = Current.encode(d as Parameters<typeof Current.encode>[0]).finish();
    const r = current.receive(Current.decode(bytes));
    for (const o of old) {
      o.agent.receive(o.decoder.decode(bytes) as StateDelta);
      t.equal(protoCanonicalJson(o.agent.view.toSnapshot()), protoCanonicalJson(current.view.toSnapshot()), `${o.revision}: message ${messages}`);
      t.equal(o.agent.view.hash(), current.view.hash());
    }
    messages++;
    return r.status === 'applied' ? r.ack : null;
  });
  t.ok(messages >= 10);
  t.equal(current.view.components.declaration?.modules[0]?.taken, true, 'the scenario reached the taken module');
});

/**
 * Records the scenario's stream, encoded with the current generated code, to streams/<revision>.jsonl.
 * Run once per released revision (after `npx tsc -b`):
 *   (from the repository root) node --import=./node_modules/@tapjs/typescript/dist/esm/import.mjs test/compat/record-stream.ts v1-r1
 */
import { writeFileSync } from 'node:fs';
import { DeltaApplier } from '@meshp/core/delta';
import { StateDelta } from '@meshp/protocol';
import { recordScenario } from './scenario.js';

const revision = process.argv[2] ?? 'v1-r1';
const agent = new DeltaApplier();
const lines: string[] = [];
recordScenario((d) => {
  const bytes = StateDelta.encode(d as Parameters<typeof StateDelta.encode>[0]).finish();
  const r = agent.receive(StateDelta.decode(bytes));
  lines.push(JSON.stringify({ delta: Buffer.from(bytes).toString('base64'), status: r.status, ...(r.status === 'applied' ? r.ack : {}) }));
  return r.status === 'applied' ? r.ack : null;
});
writeFileSync(`test/compat/streams/${revision}.jsonl`, lines.join('\n') + '\n');
console.log(`${lines.length} messages recorded to streams/${revision}.jsonl`);

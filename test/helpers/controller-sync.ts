/**
 * One round of the delta protocol between a Controller and an in-process agent (core's DeltaApplier),
 * for unit tests: what the controller would send the node now, applied and acked. Null when there is
 * nothing to send; throws when the agent does not apply it (a test of the controller expects it to).
 */
import type { StateDelta } from '@meshp/core';
import type { DeltaApplier } from '@meshp/core/delta';
import type { Controller } from '@meshp/controller';

export type Applied = Extract<ReturnType<DeltaApplier['receive']>, { status: 'applied' }>;

export function syncNode(c: Controller, agent: DeltaApplier, node: string, network = 'n'): { delta: StateDelta; applied: Applied } | null {
  const delta = c.deltaFor(network, node);
  if (!delta) return null;
  const r = agent.receive(structuredClone(delta));
  if (r.status !== 'applied') throw new Error(`${node} did not apply ${delta.fromVersion}→${delta.toVersion}: ${JSON.stringify(r)}`);
  c.ack(network, node, r.ack.appliedVersion, r.ack.stateHash);
  return { delta, applied: r };
}

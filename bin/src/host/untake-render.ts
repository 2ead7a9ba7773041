/**
 * An untake plan shown (issue 29): the local `meshp host untake` and the controller's relayed one alike.
 * Its own module so that the remote command loads no host assembly (plugins, Docker's client) to show it.
 */
import type { UntakePlan } from '@meshp/core/reconcile';
import { table } from '../output.js';

const DOES = { restore: 'RESTORE', remove: 'REMOVE', recreate: 'RECREATE', close: 'CLOSE', keep: 'keep' } as const;

/** An untake plan as this machine made it, or as the controller relays its agent's (ops as the wire's words). */
export type UntakeShown = Pick<UntakePlan, 'node' | 'module' | 'id'> & {
  steps: { key: string; op: string; what: string }[];
  blocks: { key: string; code: string; reason: string; diff?: string }[];
};

export function renderUntake(p: UntakeShown): string {
  const lines = [`untake preview ${p.id} for module ${p.module} on node ${p.node}: what the take changed, and what untake does to each`];
  if (p.steps.length > 0)
    lines.push(
      table(
        ['RESOURCE', 'UNTAKE', 'WHAT'],
        p.steps.map((s) => [s.key, DOES[s.op as UntakePlan['steps'][number]['op']] ?? s.op, s.what]),
      ),
    );
  else lines.push('(the take changed nothing untake puts back)');
  for (const b of p.blocks) lines.push(`BLOCKED ${b.key}: ${b.code}: ${b.reason}${b.diff ? `\n${b.diff}` : ''}`);
  lines.push('then the module is assigned and held: its found resources kept as they are until it is taken again');
  return lines.join('\n');
}

/** `meshp host untake MODULE` (issue 29): the untake preview, then (with --yes or a yes on the terminal) the untake. */
import { loadView } from '@meshp/core/agent';
import { untake, untakeRefusal, type UntakePlan } from '@meshp/core/reconcile';
import { confirmChange, printJson, refuse, table } from '../output.js';
import type { LocalLifecycleArgs } from './converge.js';
import { pluginSpecs } from '../plugins/load.js';
import { assembleHostWith } from './assembly.js';
import { readDeclaration } from './declaration.js';
import { renderReport } from './render.js';

export interface HostUntakeArgs extends LocalLifecycleArgs {
  module: string;
}

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

export async function hostUntake(args: HostUntakeArgs): Promise<void> {
  const host = await assembleHostWith(
    { root: args.root, stateDir: args.state, firewall: args.firewall, dockerSocket: args.dockerSocket },
    pluginSpecs(args),
  ).catch(refuse);
  try {
    const declaration = await readDeclaration(args.declaration).catch(refuse);
    const { plan } = await untake(host, declaration, args.module, { preview: true }).catch(refuse);
    // A node whose agent follows a controller is taken again at the agent's next reconcile: said, not hidden.
    const follows = (await loadView(await host.state()).catch(() => ({ snapshot: null }))).snapshot !== null;
    const note = follows ? `this node's agent follows a controller: stop it first, or it takes ${args.module} again at its next reconcile` : undefined;
    if (args.json && args.preview) return printJson({ preview: plan, ...(note ? { note } : {}) });
    if (!args.json) process.stdout.write(`${renderUntake(plan)}\n${note ? `note: ${note}\n` : ''}`);
    if (args.preview) {
      const next = plan.blocks.length > 0 ? 'untake is refused until what blocks it is resolved' : `untake with --yes --preview-id ${plan.id}`;
      process.stdout.write(`(preview: nothing changed; ${next})\n`);
      return;
    }
    if (plan.blocks.length > 0) refuse(untakeRefusal(plan));
    await confirmChange(args.yes, `Untake module ${args.module}?`, 'pass --yes (and --preview-id) to untake');
    const done = await untake(host, declaration, args.module, { previewId: args.previewId ?? plan.id }).catch(refuse);
    if (args.json) printJson({ preview: done.plan, report: done.after?.report });
    else if (done.after) process.stdout.write(`\n${renderReport(done.after.report)}\n`);
  } finally {
    await host.close();
  }
}

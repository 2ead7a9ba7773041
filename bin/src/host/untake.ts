/** `meshp host untake MODULE` (issue 29): the untake preview, then (with --yes or a yes on the terminal) the untake. */
import { loadView } from '@meshp/core/agent';
import { untake, untakeRefusal } from '@meshp/core/reconcile';
import { confirmChange, printJson, refuse } from '../output.js';
import type { LocalLifecycleArgs } from './converge.js';
import { pluginSpecs } from '../plugins/load.js';
import { assembleHostWith } from './assembly.js';
import { readDeclaration } from './declaration.js';
import { renderReport } from './render.js';
import { renderUntake } from './untake-render.js';

export { renderUntake, type UntakeShown } from './untake-render.js';

export interface HostUntakeArgs extends LocalLifecycleArgs {
  module: string;
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

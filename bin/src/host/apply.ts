import { Reconciler } from '@meshp/core/reconcile';
import { Refusal, confirmChange, printJson, refuse } from '../output.js';
import { pluginSpecs } from '../plugins/load.js';
import { assembleHostWith } from './assembly.js';
import { readDeclaration } from './declaration.js';
import { renderPlan, renderReport } from './render.js';

export interface HostApplyArgs {
  state: string;
  declaration: string;
  root: string;
  firewall: string;
  dockerSocket?: string;
  preview: boolean;
  yes: boolean;
  json: boolean;
  /** Plugins to load besides the default ones (`--plugin`), and a config file listing more. */
  plugin?: string[];
  config?: string;
}

/** Says what it will change, then changes it: --preview stops after saying, --yes skips the question. */
export async function hostApply(args: HostApplyArgs): Promise<void> {
  const host = await assembleHostWith(
    { root: args.root, stateDir: args.state, firewall: args.firewall, dockerSocket: args.dockerSocket },
    pluginSpecs(args),
  ).catch(refuse);
  try {
    const declaration = await readDeclaration(args.declaration).catch(refuse);
    const reconciler = new Reconciler(host);
    const preview = await reconciler.reconcile(declaration, { preview: true }).catch(refuse);
    const changes = preview.plan.actions.filter((a) => a.op === 'create' || a.op === 'converge' || a.op === 'remove').length;
    if (args.preview) {
      if (args.json) printJson({ preview: true, plan: preview.plan });
      else process.stdout.write(`${renderPlan(preview.plan)}\n(preview: nothing changed)\n`);
      return;
    }
    if (!args.json) process.stdout.write(`${renderPlan(preview.plan)}\n`);
    if (changes > 0) await confirmChange(args.yes, `Apply these ${changes} changes?`, 'pass --yes to apply or --preview to look only');
    const result = await reconciler.reconcile(declaration).catch(refuse);
    if (args.json) printJson({ plan: result.plan, report: result.report, failures: result.failures });
    else process.stdout.write(`\n${renderReport(result.report)}\n`);
    const refused = result.report.resources.filter((r) => r.state === 'refused');
    if (refused.length > 0) {
      throw new Refusal(
        `MESHP_REFUSED: ${refused.length} resource${refused.length === 1 ? '' : 's'} refused: ${refused.map((r) => `${r.key} (${r.reason ?? ''})`).join('; ')}`,
      );
    }
  } finally {
    await host.close();
  }
}

import { checkLiveDoors, flip, previewConverge, returnToAdopted } from '@meshp/core/lifecycle';
import { confirmChange, printJson, refuse } from '../output.js';
import type { HostApplyArgs } from './apply.js';
import { pluginSpecs } from '../plugins/load.js';
import { assembleHostWith } from './assembly.js';
import { readDeclaration } from './declaration.js';
import { renderReport } from './render.js';
import { renderPreview } from './converge-render.js';

/** `host converge` and `host adopt` take what `host apply` takes, and the preview's id. */
export interface LocalLifecycleArgs extends HostApplyArgs {
  previewId?: string;
  /** Doors (`22/tcp`) the flip may close although connections are live on them. */
  allowClose?: string[];
}

export { renderPreview } from './converge-render.js';

function hostFor(args: LocalLifecycleArgs) {
  return assembleHostWith({ root: args.root, stateDir: args.state, firewall: args.firewall, dockerSocket: args.dockerSocket }, pluginSpecs(args)).catch(refuse);
}

/** `meshp host converge`: preview, then (with --yes or a yes on the terminal) the flip. */
export async function hostConverge(args: LocalLifecycleArgs): Promise<void> {
  const host = await hostFor(args);
  try {
    const declaration = await readDeclaration(args.declaration).catch(refuse);
    const preview = await previewConverge(host, declaration).catch(refuse);
    if (args.json && args.preview) return printJson({ preview });
    if (!args.json) process.stdout.write(`${renderPreview(preview)}\n`);
    if (args.preview) {
      process.stdout.write(`(preview: nothing changed; flip with --yes --preview-id ${preview.id})\n`);
      return;
    }
    try {
      checkLiveDoors(preview, args.allowClose ?? []);
    } catch (e) {
      refuse(e);
    }
    await confirmChange(args.yes, 'Converge this node?', 'pass --yes (and --preview-id) to flip');
    const progress = (step: string) => {
      if (!args.json) process.stdout.write(`-> ${step}\n`);
    };
    const done = await flip(host, declaration, args.previewId ?? preview.id, progress).catch(refuse);
    if (args.json) printJson({ preview: done.preview, retired: done.retired, report: done.result.report });
    else process.stdout.write(`${renderReport(done.result.report)}\n`);
  } finally {
    await host.close();
  }
}

/** `meshp host adopt`: back to adopted, the found firewall re-enabled. */
export async function hostAdopt(args: LocalLifecycleArgs): Promise<void> {
  const host = await hostFor(args);
  try {
    const declaration = await readDeclaration(args.declaration).catch(refuse);
    await confirmChange(args.yes, 'Re-enable the found firewall and unload the mesh filter?', 'pass --yes to return the node to adopted');
    const progress = (step: string) => {
      if (!args.json) process.stdout.write(`-> ${step}\n`);
    };
    const result = await returnToAdopted(host, declaration, progress).catch(refuse);
    if (args.json) printJson({ report: result.report });
    else process.stdout.write(`${renderReport(result.report)}\n`);
  } finally {
    await host.close();
  }
}

import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { lifecycleOptions, type LocalLifecycleOptions } from './host-converge.js';

interface Args extends LocalLifecycleOptions {
  module: string;
  preview: boolean;
  'preview-id'?: string;
}

export const hostUntakeCommand: CommandModule<GlobalArgs, Args> = {
  command: 'untake <module>',
  describe: "preview, then undo a module's take on the local node: found files restored, the predecessor's container recreated, the module held again",
  builder: (y) =>
    lifecycleOptions(y)
      .positional('module', { type: 'string', demandOption: true, describe: 'the taken module' })
      .option('preview', { type: 'boolean', default: false, describe: 'list what the take changed and what untake does to each; change nothing' })
      .option('preview-id', { type: 'string', describe: 'untake only if the machine is still as this preview saw it' }) as never,
  handler: async (argv) => {
    const { hostUntake } = await import('../host/untake.js');
    await hostUntake({
      state: argv.state!,
      declaration: argv.declaration,
      module: argv.module,
      root: argv.root,
      firewall: argv.firewall,
      dockerSocket: argv['docker-socket'],
      preview: argv.preview,
      previewId: argv['preview-id'],
      yes: argv.yes,
      json: argv.json,
      plugin: argv.plugin,
      config: argv.config,
    });
  },
};

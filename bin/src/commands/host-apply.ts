import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { pluginOptions, type PluginArgs } from './plugin-options.js';

interface Args extends GlobalArgs, PluginArgs {
  declaration: string;
  root: string;
  firewall: string;
  'docker-socket'?: string;
  preview: boolean;
  yes: boolean;
}

export const hostApplyCommand: CommandModule<GlobalArgs, Args> = {
  command: 'apply',
  describe: 'converge the local machine to a declaration file, keeping what it found (like puppet apply)',
  builder: (y) =>
    pluginOptions(y)
      .option('declaration', { type: 'string', demandOption: true, describe: 'the declaration (JSON)' })
      .option('root', { type: 'string', default: '/', describe: 'prefix of every path the host reads or writes' })
      .option('firewall', { type: 'string', default: 'auto', describe: 'auto, or the firewall kind to insist on' })
      .option('docker-socket', { type: 'string', describe: 'the container engine socket' })
      .option('preview', { type: 'boolean', default: false, describe: 'print the plan and change nothing' })
      .option('yes', { type: 'boolean', default: false, describe: 'apply without asking' })
      .demandOption('state'),
  handler: async (argv) => {
    const { hostApply } = await import('../host/apply.js');
    await hostApply({
      state: argv.state!,
      declaration: argv.declaration,
      root: argv.root,
      firewall: argv.firewall,
      dockerSocket: argv['docker-socket'],
      preview: argv.preview,
      yes: argv.yes,
      json: argv.json,
      plugin: argv.plugin,
      config: argv.config,
    });
  },
};

import type { Argv, CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { pluginOptions, type PluginArgs } from './plugin-options.js';

export interface LocalLifecycleOptions extends GlobalArgs, PluginArgs {
  declaration: string;
  root: string;
  firewall: string;
  'docker-socket'?: string;
  yes: boolean;
}

export function lifecycleOptions(y: Argv<GlobalArgs>): Argv<LocalLifecycleOptions> {
  return pluginOptions(y)
    .option('declaration', { type: 'string', demandOption: true, describe: 'the declaration (JSON): the modules assigned to this node' })
    .option('root', { type: 'string', default: '/', describe: 'prefix of every path the host reads or writes' })
    .option('firewall', { type: 'string', default: 'auto', describe: 'auto, or the firewall kind to insist on' })
    .option('docker-socket', { type: 'string', describe: 'the container engine socket' })
    .option('yes', { type: 'boolean', default: false, describe: 'do it without asking' })
    .demandOption('state') as Argv<LocalLifecycleOptions>;
}

interface Args extends LocalLifecycleOptions {
  preview: boolean;
  'preview-id'?: string;
  'allow-close': string[];
}

export const hostConvergeCommand: CommandModule<GlobalArgs, Args> = {
  command: 'converge',
  describe: 'preview, then flip the local node to converged: take every module, load the derived filter, retire the found firewall',
  builder: (y) =>
    lifecycleOptions(y)
      .option('preview', { type: 'boolean', default: false, describe: 'list every reachable port and what the flip does to it; change nothing' })
      .option('preview-id', { type: 'string', describe: 'flip only if the machine is still as this preview saw it' })
      .option('allow-close', {
        type: 'string',
        array: true,
        default: [],
        describe: 'a door (22/tcp) the flip may close although connections are live on it (repeatable)',
      }),
  handler: async (argv) => {
    const { hostConverge } = await import('../host/converge.js');
    await hostConverge({
      state: argv.state!,
      declaration: argv.declaration,
      root: argv.root,
      firewall: argv.firewall,
      dockerSocket: argv['docker-socket'],
      preview: argv.preview,
      previewId: argv['preview-id'],
      allowClose: argv['allow-close'],
      yes: argv.yes,
      json: argv.json,
      plugin: argv.plugin,
      config: argv.config,
    });
  },
};

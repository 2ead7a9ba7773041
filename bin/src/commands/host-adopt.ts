import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { lifecycleOptions, type LocalLifecycleOptions } from './host-converge.js';

export const hostAdoptCommand: CommandModule<GlobalArgs, LocalLifecycleOptions> = {
  command: 'adopt',
  describe: 'return the local node to adopted: re-enable the retired found firewall, unload the derived filter',
  builder: lifecycleOptions,
  handler: async (argv) => {
    const { hostAdopt } = await import('../host/converge.js');
    await hostAdopt({
      state: argv.state!,
      declaration: argv.declaration,
      root: argv.root,
      firewall: argv.firewall,
      dockerSocket: argv['docker-socket'],
      preview: false,
      yes: argv.yes,
      json: argv.json,
      plugin: argv.plugin,
      config: argv.config,
    });
  },
};

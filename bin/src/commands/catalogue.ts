import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../cli.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

const add: CommandModule<GlobalArgs, GlobalArgs & ChangeArgs & { network: string; credential?: string; file: string }> = {
  command: 'add <file>',
  describe: 'define modules from a JSON file (one module, a list, or { "modules": [...] })',
  builder: (y) => changeOptions(remoteOptions(y)).positional('file', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { catalogueAdd } = await import('../remote/ops.js');
    await catalogueAdd(a);
  },
};

export const catalogueCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'catalogue <command>',
  describe: "the network's catalogue of modules",
  builder: (y) => y.command(add).demandCommand(1),
  handler: () => undefined,
};

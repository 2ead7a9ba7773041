import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
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

type R = GlobalArgs & { network: string; credential?: string };

const list: CommandModule<GlobalArgs, R> = {
  command: 'list',
  describe: "the catalogue's modules: what each declares, the settings it names, the nodes it is assigned to",
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { catalogueList } = await import('../remote/readback.js');
    await catalogueList(a);
  },
};

const show: CommandModule<GlobalArgs, R & { module: string }> = {
  command: 'show <module>',
  describe: 'one module: its nodes and its definition as stored (placeholders as written)',
  builder: (y) => remoteOptions(y).positional('module', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { catalogueShow } = await import('../remote/readback.js');
    await catalogueShow(a);
  },
};

const remove: CommandModule<GlobalArgs, R & ChangeArgs & { module: string }> = {
  command: 'remove <module>',
  describe: 'forget a module no node has assigned (one assigned is refused, naming the nodes)',
  builder: (y) => changeOptions(remoteOptions(y)).positional('module', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { catalogueRemove } = await import('../remote/readback.js');
    await catalogueRemove(a);
  },
};

export const catalogueCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'catalogue <command>',
  describe: "the network's catalogue of modules",
  builder: (y) => y.command(add).command(list).command(show).command(remove).demandCommand(1),
  handler: () => undefined,
};

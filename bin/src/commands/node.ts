import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../cli.js';
import { remoteOptions } from './remote-options.js';

type R = GlobalArgs & { network: string; credential?: string };

const list: CommandModule<GlobalArgs, R> = {
  command: 'list',
  describe: 'every node: mode, applied version, convergence gap, firewall kind, held and changed resources',
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { nodeList } = await import('../remote/ops.js');
    await nodeList(a);
  },
};

const show: CommandModule<GlobalArgs, R & { node: string }> = {
  command: 'show <node>',
  describe: 'one node, and the last deltas sent to it',
  builder: (y) => remoteOptions(y).positional('node', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { nodeShow } = await import('../remote/ops.js');
    await nodeShow(a);
  },
};

export const nodeCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'node <command>',
  describe: 'the nodes of a network',
  builder: (y) => y.command(list).command(show).demandCommand(1),
  handler: () => undefined,
};

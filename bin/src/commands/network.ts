import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { remoteOptions } from './remote-options.js';

type R = GlobalArgs & { network: string; credential?: string };

const create: CommandModule<GlobalArgs, R & { name: string; range?: string }> = {
  command: 'create <name>',
  describe: 'a new network on this controller (a node joins one with a token made for it)',
  builder: (y) =>
    remoteOptions(y)
      .positional('name', { type: 'string', demandOption: true })
      .option('range', { type: 'string', describe: 'its private range (default 100.96.0.0/16)' }),
  handler: async (a) => {
    const { networkCreate } = await import('../remote/membership.js');
    await networkCreate(a);
  },
};

const list: CommandModule<GlobalArgs, R> = {
  command: 'list',
  describe: 'the networks of this controller: nodes, state version, private range',
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { networkList } = await import('../remote/membership.js');
    await networkList(a);
  },
};

const remove: CommandModule<GlobalArgs, R & { name: string; yes: boolean }> = {
  command: 'remove <name>',
  describe: 'forget a network with no node left',
  builder: (y) =>
    remoteOptions(y)
      .positional('name', { type: 'string', demandOption: true })
      .option('yes', { type: 'boolean', default: false, describe: 'remove without asking' }),
  handler: async (a) => {
    const { networkRemove } = await import('../remote/membership.js');
    await networkRemove(a);
  },
};

const lifetime: CommandModule<GlobalArgs, R & { duration?: string }> = {
  command: 'lifetime [duration]',
  describe:
    "how long a node's credential lives from its enrolment or renewal (default 180d); with DURATION (90s, 30m, 12h, 180d): set, for each enrolment and renewal from now on",
  builder: (y) => remoteOptions(y).positional('duration', { type: 'string' }),
  handler: async (a) => {
    const { networkLifetime } = await import('../remote/expiry.js');
    await networkLifetime(a);
  },
};

export const networkCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'network <command>',
  describe: 'the networks of a controller',
  builder: (y) => y.command(create).command(list).command(remove).command(lifetime).demandCommand(1),
  handler: () => undefined,
};

import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../cli.js';
import { remoteOptions } from './remote-options.js';

const create: CommandModule<GlobalArgs, GlobalArgs & { network: string; credential?: string; adopted: boolean; ttl: string; tag: string[] }> = {
  command: 'create',
  describe: 'a single-use enrolment token (carries the network, the mode and the controller fingerprint)',
  builder: (y) =>
    remoteOptions(y)
      .option('adopted', { type: 'boolean', default: false, describe: 'the node joins adopted: what it runs is kept' })
      .option('ttl', { type: 'string', default: '1h', describe: 'how long the token lives (90s, 30m, 1h, 7d)' })
      .option('tag', { type: 'string', array: true, default: [] as string[], describe: 'tags the node gets' }),
  handler: async (a) => {
    const { tokenCreate } = await import('../remote/ops.js');
    await tokenCreate({ ...a, tags: a.tag });
  },
};

export const tokenCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'token <command>',
  describe: 'enrolment tokens',
  builder: (y) => y.command(create).demandCommand(1),
  handler: () => undefined,
};

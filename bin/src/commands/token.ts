import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

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

type R = GlobalArgs & { network: string; credential?: string };

const list: CommandModule<GlobalArgs, R> = {
  command: 'list',
  describe: "the network's enrolment tokens by id (never the secret): mode, tags, made, expires, used by whom or not",
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { tokenList } = await import('../remote/readback.js');
    await tokenList(a);
  },
};

const revoke: CommandModule<GlobalArgs, R & ChangeArgs & { id: string }> = {
  command: 'revoke <id>',
  describe: 'make an unused token unusable: an enrolment with it is refused (MESHP_TOKEN_INVALID)',
  builder: (y) => changeOptions(remoteOptions(y)).positional('id', { type: 'string', demandOption: true, describe: 'the ID column of token list' }),
  handler: async (a) => {
    const { tokenRevoke } = await import('../remote/readback.js');
    await tokenRevoke(a);
  },
};

export const tokenCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'token <command>',
  describe: 'enrolment tokens',
  builder: (y) => y.command(create).command(list).command(revoke).demandCommand(1),
  handler: () => undefined,
};

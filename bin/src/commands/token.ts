import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type CreateArgs = GlobalArgs & {
  network: string;
  credential?: string;
  adopted: boolean;
  ttl: string;
  tag: string[];
  reusable: boolean;
  uses?: number;
  ephemeral: boolean;
  grace?: string;
};

const create: CommandModule<GlobalArgs, CreateArgs> = {
  command: 'create',
  describe: 'an enrolment token (carries the network, the mode and the controller fingerprint): single-use, or --reusable; --ephemeral nodes go when gone',
  builder: (y) =>
    remoteOptions(y)
      .option('adopted', { type: 'boolean', default: false, describe: 'the node joins adopted: what it runs is kept' })
      .option('ttl', { type: 'string', default: '1h', describe: 'how long the token lives (90s, 30m, 1h, 7d)' })
      .option('tag', { type: 'string', array: true, default: [] as string[], describe: "tags the node gets (never the control-node's)" })
      .option('reusable', { type: 'boolean', default: false, describe: 'enrols several nodes, up to --uses (then MESHP_TOKEN_USED_UP)' })
      .option('uses', { type: 'number', describe: 'how many nodes a --reusable token enrols (default 10)' })
      .option('ephemeral', { type: 'boolean', default: false, describe: 'a node it enrols is removed once it has had no stream for --grace' })
      .option('grace', { type: 'string', describe: 'how long an --ephemeral node may be gone before it is removed (default 30m)' }),
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

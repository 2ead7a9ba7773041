import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type R = GlobalArgs & { network: string; credential?: string };

const create: CommandModule<GlobalArgs, R & { name: string; role: string; out?: string }> = {
  command: 'create <name>',
  describe: 'a named admin credential: its own secret, its name the actor of its calls in the audit log (printed once, or written to --out)',
  builder: (y) =>
    remoteOptions(y)
      .positional('name', { type: 'string', demandOption: true, describe: "the credential's name (the actor in meshp audit)" })
      .option('role', {
        type: 'string',
        choices: ['admin', 'read-only'],
        default: 'admin',
        describe: 'admin: every call; read-only: reads and previews, no change',
      })
      .option('out', { type: 'string', describe: 'write the credential to this new file (0600; an existing file is refused) instead of printing it' }),
  handler: async (a) => {
    const { adminCreate } = await import('../remote/admins.js');
    await adminCreate(a);
  },
};

const list: CommandModule<GlobalArgs, R> = {
  command: 'list',
  describe: 'the named admin credentials (never a secret): role, made, revoked',
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { adminList } = await import('../remote/admins.js');
    await adminList(a);
  },
};

const revoke: CommandModule<GlobalArgs, R & ChangeArgs & { name: string }> = {
  command: 'revoke <name>',
  describe: 'refuse a named admin credential from its next call on, on every replica (MESHP_AUTH_FAILED)',
  builder: (y) => changeOptions(remoteOptions(y)).positional('name', { type: 'string', demandOption: true, describe: 'the NAME column of admin list' }),
  handler: async (a) => {
    const { adminRevoke } = await import('../remote/admins.js');
    await adminRevoke(a);
  },
};

const whoami: CommandModule<GlobalArgs, R> = {
  command: 'whoami',
  describe: 'who the credential presented is (the actor in meshp audit) and its role',
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { adminWhoAmI } = await import('../remote/admins.js');
    await adminWhoAmI(a);
  },
};

export const adminCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'admin <command>',
  describe: 'named admin credentials and their roles',
  builder: (y) => y.command(create).command(list).command(revoke).command(whoami).demandCommand(1),
  handler: () => undefined,
};

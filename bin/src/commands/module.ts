import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';
import { releaseCommand, untakeCommand } from './module-untake.js';

type Act = 'assign' | 'unassign' | 'take';

const DESCRIBE: Record<Act, string> = {
  assign: 'assign a module to a node (on an adopted node: prepares it, what is found is held)',
  unassign: 'unassign a module (held resources are left in place)',
  take: 'take a module on a node: its cutover, from then on its resources converge',
};

function act(name: Act): CommandModule<GlobalArgs, GlobalArgs & ChangeArgs & { network: string; credential?: string; node: string; module: string }> {
  return {
    command: `${name} <node> <module>`,
    describe: DESCRIBE[name],
    builder: (y) =>
      changeOptions(remoteOptions(y)).positional('node', { type: 'string', demandOption: true }).positional('module', { type: 'string', demandOption: true }),
    handler: async (a) => {
      const { moduleChange } = await import('../remote/ops.js');
      await moduleChange({ ...a, act: name });
    },
  };
}

export const moduleCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'module <command>',
  describe: "a node's modules",
  builder: (y) => y.command(act('assign')).command(act('unassign')).command(act('take')).command(untakeCommand).command(releaseCommand).demandCommand(1),
  handler: () => undefined,
};

import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { hostAdoptCommand } from './host-adopt.js';
import { hostApplyCommand } from './host-apply.js';
import { hostConvergeCommand } from './host-converge.js';
import { hostStatusCommand } from './host-status.js';
import { hostUntakeCommand } from './host-untake.js';

export const hostCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'host <command>',
  describe: 'work on the local machine without a controller',
  builder: (y) =>
    y.command(hostApplyCommand).command(hostStatusCommand).command(hostConvergeCommand).command(hostAdoptCommand).command(hostUntakeCommand).demandCommand(1),
  handler: () => undefined,
};

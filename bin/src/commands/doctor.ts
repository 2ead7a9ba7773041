import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../cli.js';
import { remoteOptions } from './remote-options.js';

export const doctorCommand: CommandModule<GlobalArgs, GlobalArgs & { network: string; credential?: string; node: string }> = {
  command: 'doctor <node>',
  describe: "a node's applied version and gap, the last deltas sent matched with its acks, its firewall and held resources",
  builder: (y) => remoteOptions(y).positional('node', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { doctor } = await import('../remote/ops.js');
    await doctor(a);
  },
};

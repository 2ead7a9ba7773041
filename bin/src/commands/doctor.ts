import type { CommandModule } from 'yargs';
import { usage } from '@meshp/core/util';
import type { GlobalArgs } from '../global-args.js';
import { remoteOptions } from './remote-options.js';

type Args = GlobalArgs & { network: string; credential?: string; node?: string; local: boolean };

export const doctorCommand: CommandModule<GlobalArgs, Args> = {
  command: 'doctor [node]',
  describe:
    "a node's applied version and gap, the last deltas sent matched with its acks, its firewall and held resources; --local reads this node's own store",
  builder: (y) =>
    remoteOptions(y)
      .positional('node', { type: 'string' })
      .option('local', { type: 'boolean', default: false, describe: "read this node's own state folder (--state DIR), no controller" })
      // A usage error, coded as one (exit 2): yargs hands a check's Error on as it is.
      .check((a) => {
        if (a.local ? a.node !== undefined : a.node === undefined) throw usage('name a node, or say --local --state DIR');
        if (a.local && !a.state) throw usage('--local needs --state DIR (the agent state folder)');
        return true;
      }),
  handler: async (a) => {
    if (a.local) {
      const { doctorLocal } = await import('../host/doctor-local.js');
      return doctorLocal({ state: a.state!, json: a.json });
    }
    const { doctor } = await import('../remote/ops.js');
    await doctor({ ...a, node: a.node! });
  },
};

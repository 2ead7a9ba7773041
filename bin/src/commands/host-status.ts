import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';

export const hostStatusCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'status',
  describe: "the local node's last report: mode, firewall kind, every resource and its state",
  builder: (y) => y.demandOption('state'),
  handler: async (argv) => {
    const { hostStatus } = await import('../host/status.js');
    await hostStatus({ state: argv.state!, json: argv.json });
  },
};

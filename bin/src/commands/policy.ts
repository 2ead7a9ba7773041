import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

const set: CommandModule<GlobalArgs, GlobalArgs & ChangeArgs & { network: string; credential?: string; file: string }> = {
  command: 'set <file>',
  describe: 'replace the policy from a JSON file: { "rules": [ { "from": TAG, "to": TAG, "ports": [...] } ] }',
  builder: (y) => changeOptions(remoteOptions(y)).positional('file', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { policySet } = await import('../remote/ops.js');
    await policySet(a);
  },
};

export const policyCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'policy <command>',
  describe: "the network's policy: who may reach whom",
  builder: (y) => y.command(set).demandCommand(1),
  handler: () => undefined,
};

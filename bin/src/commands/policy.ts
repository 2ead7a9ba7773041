import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type Remote = GlobalArgs & { network: string; credential?: string };

const get: CommandModule<GlobalArgs, Remote> = {
  command: 'get',
  describe: 'the policy in force (rules and tests) and the state version that set it',
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { policyGet } = await import('../remote/policy.js');
    await policyGet(a);
  },
};

const set: CommandModule<GlobalArgs, Remote & ChangeArgs & { file: string; 'preview-id'?: string }> = {
  command: 'set <file>',
  describe:
    'replace the policy from a JSON file: { "rules": [ { "from": TAG, "to": TAG, "ports": [...] } ], "tests": [ { "from", "to", "port", "expect": "accept"|"deny" } ] }; --preview shows who gains and loses which peer and port',
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('file', { type: 'string', demandOption: true })
      .option('preview-id', { type: 'string', describe: 'set only if the policy in force and the membership are still as this preview saw them' }),
  handler: async (a) => {
    const { policySet } = await import('../remote/policy.js');
    await policySet({ ...a, previewId: a['preview-id'] });
  },
};

const test: CommandModule<GlobalArgs, Remote & { file: string }> = {
  command: 'test <file>',
  describe: "run a policy file's tests on the controller, against the file's rules; nothing is set",
  builder: (y) => remoteOptions(y).positional('file', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { policyTest } = await import('../remote/policy.js');
    await policyTest(a);
  },
};

export const policyCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'policy <command>',
  describe: "the network's policy: who may reach whom",
  builder: (y) => y.command(get).command(set).command(test).demandCommand(1),
  handler: () => undefined,
};

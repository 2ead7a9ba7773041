import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type RelayArgs = GlobalArgs & { network: string; credential?: string };

const list: CommandModule<GlobalArgs, RelayArgs> = {
  command: 'list',
  describe: "the network's relays (TURN servers): their server, secret name, and the nodes with an allocation on each",
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { relayList } = await import('../remote/relay.js');
    await relayList(a);
  },
};

type SetArgs = RelayArgs & ChangeArgs & { id: string; server: string; transport: string; region: string; secret: string; secretFile?: string };
const set: CommandModule<GlobalArgs, SetArgs> = {
  command: 'set <id>',
  describe: 'add or replace a relay: a TURN server (coturn use-auth-secret) that carries WireGuard for pairs with no direct path',
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('id', { type: 'string', demandOption: true })
      .option('server', { type: 'string', demandOption: true, describe: 'the TURN server, HOST:PORT (e.g. 203.0.113.5:3478)' })
      .option('transport', { type: 'string', choices: ['udp', 'tcp'], default: 'udp', describe: 'the transport to the TURN server' })
      .option('region', { type: 'string', default: '', describe: 'a free label (where it runs)' })
      .option('secret', { type: 'string', demandOption: true, describe: 'the name of its shared secret (coturn static-auth-secret) the controller holds' })
      .option('secret-file', { type: 'string', describe: "a file holding the secret's value: given to the controller, never sent to a node" }),
  handler: async (a) => {
    const { relaySet } = await import('../remote/relay.js');
    await relaySet(a);
  },
};

const remove: CommandModule<GlobalArgs, RelayArgs & ChangeArgs & { id: string }> = {
  command: 'remove <id>',
  describe: 'remove a relay: its nodes lose their credentials for it and their relayed paths through it',
  builder: (y) => changeOptions(remoteOptions(y)).positional('id', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { relayRemove } = await import('../remote/relay.js');
    await relayRemove(a);
  },
};

export const relayCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'relay <command>',
  describe: 'relays: TURN servers through which nodes with no direct path reach each other (the relay sees only WireGuard ciphertext)',
  builder: (y) => y.command(list).command(set).command(remove).demandCommand(1),
  handler: () => undefined,
};

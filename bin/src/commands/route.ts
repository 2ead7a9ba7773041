import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type RouteArgs = GlobalArgs & { network: string; credential?: string };

const list: CommandModule<GlobalArgs, RouteArgs> = {
  command: 'list',
  describe: "the network's route groups: their prefixes, via nodes, primary and users",
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { routeList } = await import('../remote/route.js');
    await routeList(a);
  },
};

const set: CommandModule<GlobalArgs, RouteArgs & ChangeArgs & { name: string; prefix: string[]; via: string[]; masquerade: boolean; exit: boolean }> = {
  command: 'set <name>',
  describe: 'add or replace a route group: its prefixes reached through its via nodes (the first that is a member is the primary)',
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('name', { type: 'string', demandOption: true })
      .option('prefix', { type: 'string', array: true, default: [] as string[], describe: 'a prefix the group routes, IPv4 or IPv6 (repeat for more)' })
      .option('exit', {
        type: 'boolean',
        default: false,
        describe: 'an exit node: the group routes 0.0.0.0/0 and ::/0 (used only by the nodes that opt in: --exit-node, node exit-node)',
      })
      .option('via', { type: 'string', array: true, demandOption: true, describe: 'a node that routes it, in order of preference (repeat for more)' })
      .option('masquerade', {
        type: 'boolean',
        default: true,
        describe: 'the via nodes masquerade (SNAT) mesh sources toward the prefixes; --no-masquerade: the LAN sees the mesh addresses (it needs a route back)',
      }),
  handler: async (a) => {
    const { routeSet } = await import('../remote/route.js');
    await routeSet(a);
  },
};

const approve: CommandModule<GlobalArgs, RouteArgs & ChangeArgs & { node: string; group: string; prefix: string[] }> = {
  command: 'approve <node>',
  describe: 'approve prefixes a node advertises (meshp agent --advertise-route): the node becomes a via node of the group, the prefixes its',
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('node', { type: 'string', demandOption: true })
      .option('group', { type: 'string', demandOption: true, describe: 'the route group (made when absent)' })
      .option('prefix', {
        type: 'string',
        array: true,
        default: [] as string[],
        describe: 'an advertised prefix to approve (default: every one the node advertises)',
      }),
  handler: async (a) => {
    const { routeApprove } = await import('../remote/route.js');
    await routeApprove(a);
  },
};

const remove: CommandModule<GlobalArgs, RouteArgs & ChangeArgs & { name: string }> = {
  command: 'remove <name>',
  describe: 'remove a route group: its users lose its prefixes and, unless the policy keeps them, its via nodes',
  builder: (y) => changeOptions(remoteOptions(y)).positional('name', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { routeRemove } = await import('../remote/route.js');
    await routeRemove(a);
  },
};

export const routeCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'route <command>',
  describe: 'route groups: prefixes behind mesh nodes, used by the nodes a policy rule to route:NAME lets use them',
  builder: (y) => y.command(list).command(set).command(approve).command(remove).demandCommand(1),
  handler: () => undefined,
};

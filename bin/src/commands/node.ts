import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { changeOptions, remoteOptions, type ChangeArgs } from './remote-options.js';

type R = GlobalArgs & { network: string; credential?: string };

const list: CommandModule<GlobalArgs, R> = {
  command: 'list',
  describe:
    "every node: STATUS (what stands out, worst first: SILENT, DIVERGED, REFUSING, NO-HANDSHAKE, CHANGING, BEHIND, UNVERIFIED), mode, APPLIED (its version) of STATE (the network's), GAP (STATE − APPLIED when a change since APPLIED concerns the node, else 0: changes that do not concern it are nothing to apply), firewall kind, held and changed resources, LAST CONTACT (now while its stream is open)",
  builder: (y) => remoteOptions(y),
  handler: async (a) => {
    const { nodeList } = await import('../remote/ops.js');
    await nodeList(a);
  },
};

const show: CommandModule<GlobalArgs, R & { node: string }> = {
  command: 'show <node>',
  describe: 'one node, and the last deltas sent to it',
  builder: (y) => remoteOptions(y).positional('node', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { nodeShow } = await import('../remote/ops.js');
    await nodeShow(a);
  },
};

type L = R & { node: string; timeout: number };

const converge: CommandModule<GlobalArgs, L & { preview: boolean; yes: boolean; 'preview-id'?: string; 'allow-close': string[] }> = {
  command: 'converge <node>',
  describe:
    'preview, then flip the node to converged: every reachable port and what closes; the agent takes every module, loads the derived filter, retires the found firewall',
  builder: (y) =>
    remoteOptions(y)
      .positional('node', { type: 'string', demandOption: true })
      .option('preview', { type: 'boolean', default: false, describe: 'list every reachable port on the node and what the flip does to it; change nothing' })
      .option('yes', { type: 'boolean', default: false, describe: 'flip without asking' })
      .option('preview-id', { type: 'string', describe: 'flip only if the node is still as this preview saw it' })
      .option('allow-close', {
        type: 'string',
        array: true,
        default: [],
        describe: 'a door (22/tcp) the flip may close although connections are live on it (repeatable)',
      })
      .option('timeout', { type: 'number', default: 120, describe: 'seconds to wait for the node to report the outcome' }),
  handler: async (a) => {
    const { nodeConverge } = await import('../remote/lifecycle.js');
    await nodeConverge({ ...a, previewId: a['preview-id'], allowClose: a['allow-close'] });
  },
};

const adopt: CommandModule<GlobalArgs, L & { preview: boolean; yes: boolean }> = {
  command: 'adopt <node>',
  describe: 'return the node to adopted: the agent re-enables the found firewall it retired and unloads the derived filter',
  builder: (y) =>
    remoteOptions(y)
      .positional('node', { type: 'string', demandOption: true })
      .option('preview', { type: 'boolean', default: false, describe: 'say what the return does; change nothing' })
      .option('yes', { type: 'boolean', default: false, describe: 'return without asking (required off a terminal)' })
      .option('timeout', { type: 'number', default: 120, describe: 'seconds to wait for the node to report the outcome' }),
  handler: async (a) => {
    const { nodeAdopt } = await import('../remote/lifecycle.js');
    await nodeAdopt(a);
  },
};

const remove: CommandModule<GlobalArgs, R & ChangeArgs & { node: string }> = {
  command: 'remove <node>',
  describe: 'the node leaves the network: its credential and key are revoked, its stream closed, its peers drop it (REMOVED)',
  builder: (y) => changeOptions(remoteOptions(y)).positional('node', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { nodeRemove } = await import('../remote/membership.js');
    await nodeRemove(a);
  },
};

const rename: CommandModule<GlobalArgs, R & { node: string; 'new-name': string }> = {
  command: 'rename <node> <new-name>',
  describe: 'a new name for the node; its key, credential and tunnel stay',
  builder: (y) => remoteOptions(y).positional('node', { type: 'string', demandOption: true }).positional('new-name', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { nodeRename } = await import('../remote/membership.js');
    await nodeRename({ ...a, newName: a['new-name'] });
  },
};

const tag: CommandModule<GlobalArgs, R & ChangeArgs & { node: string; tags: string[]; 'preview-id'?: string }> = {
  command: 'tag <node> [tags..]',
  describe:
    "replace the node's tags (all of them; none: untagged) as a normal change its peers get in their next delta; --preview shows who gains and loses which peer and port under the policy in force",
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('node', { type: 'string', demandOption: true })
      .positional('tags', { type: 'string', array: true, default: [] })
      .option('preview-id', { type: 'string', describe: 'change only if the policy in force, the membership and the tags are still as this preview saw them' }),
  handler: async (a) => {
    const { nodeTag } = await import('../remote/policy.js');
    await nodeTag({ ...a, tags: a.tags.map(String), previewId: a['preview-id'] });
  },
};

const expire: CommandModule<GlobalArgs, R & ChangeArgs & { node: string }> = {
  command: 'expire <node>',
  describe:
    "the node's credential expires now: its hello is refused MESHP_NODE_EXPIRED, its peers drop it from their filter and allowed IPs in one delta; it stays a member (node renew brings it back)",
  builder: (y) => changeOptions(remoteOptions(y)).positional('node', { type: 'string', demandOption: true }),
  handler: async (a) => {
    const { nodeExpire } = await import('../remote/expiry.js');
    await nodeExpire(a);
  },
};

const renew: CommandModule<GlobalArgs, R & ChangeArgs & { node: string; for?: string }> = {
  command: 'renew <node>',
  describe:
    "the node's credential renewed from now (the network's node lifetime, or --for); an expired node is back in its peers' views in one delta, without a token",
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('node', { type: 'string', demandOption: true })
      .option('for', { type: 'string', describe: "the term from now (90s, 30m, 12h, 180d); default the network's node lifetime (meshp network lifetime)" }),
  handler: async (a) => {
    const { nodeRenew } = await import('../remote/expiry.js');
    await nodeRenew(a);
  },
};

const rekey: CommandModule<GlobalArgs, R & ChangeArgs & { node: string; timeout: number }> = {
  command: 'rekey <node>',
  describe: "the node's WireGuard key rotated: its agent makes a new key and reports it, its peers get it in one delta (the node must be connected)",
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('node', { type: 'string', demandOption: true })
      .option('timeout', { type: 'number', default: 30, describe: 'seconds to wait for the controller to hold the new key' }),
  handler: async (a) => {
    const { nodeRekey } = await import('../remote/expiry.js');
    await nodeRekey(a);
  },
};

const exitNode: CommandModule<GlobalArgs, R & ChangeArgs & { node: string; group?: string; off: boolean; clear: boolean }> = {
  command: 'exit-node <node> [group]',
  describe:
    "the exit node (a route group made with route set --exit) the node sends its default routes through: the admin's setting wins over the agent's --exit-node; --off: none; --clear: the agent's own holds",
  builder: (y) =>
    changeOptions(remoteOptions(y))
      .positional('node', { type: 'string', demandOption: true })
      .positional('group', { type: 'string', describe: 'the exit node (route group) to use' })
      .option('off', { type: 'boolean', default: false, describe: 'the node uses no exit node, whatever its agent asks' })
      .option('clear', { type: 'boolean', default: false, describe: "the admin's setting goes: the agent's --exit-node holds again" }),
  handler: async (a) => {
    const { nodeExitNode } = await import('../remote/route.js');
    await nodeExitNode(a);
  },
};

export const nodeCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'node <command>',
  describe: 'the nodes of a network',
  builder: (y) =>
    y
      .command(list)
      .command(show)
      .command(converge)
      .command(adopt)
      .command(remove)
      .command(rename)
      .command(tag)
      .command(expire)
      .command(renew)
      .command(rekey)
      .command(exitNode)
      .demandCommand(1),
  handler: () => undefined,
};

import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { pluginOptions, type PluginArgs } from './plugin-options.js';
import { agentLeaveCommand } from './agent-leave.js';

interface Args extends Omit<GlobalArgs, 'controller'>, PluginArgs {
  controller?: string[];
  token?: string;
  'token-file'?: string;
  name?: string;
  root: string;
  firewall: string;
  'docker-socket'?: string;
  interval: number;
  endpoint: string[];
  tunnel?: string;
  'tunnel-interface'?: string;
  'tunnel-move'?: boolean;
  'tunnel-grace': number;
  'metrics-listen'?: string;
}

export const agentCommand: CommandModule<GlobalArgs, Args> = {
  command: 'agent',
  describe: 'follow a controller: enrol once with a token, then apply what it sends until SIGTERM',
  builder: (y) =>
    pluginOptions(y)
      .command(agentLeaveCommand)
      .option('controller', {
        type: 'string',
        array: true,
        describe:
          'HOST:PORT of the controller; repeat it for each replica sharing one store (same certificate): tried in order, the next when one is unavailable. Kept in the state folder: needed at the first start only',
      })
      .option('token', {
        type: 'string',
        describe: 'the enrolment token (needed once; visible to other users in the process list: prefer --token-file or MESHP_TOKEN)',
      })
      .option('token-file', { type: 'string', describe: 'read the enrolment token from this file' })
      .option('name', { type: 'string', describe: 'the node name to ask for (default: the host name)' })
      .option('root', { type: 'string', default: '/', describe: 'prefix of every path the host reads or writes' })
      .option('firewall', { type: 'string', default: 'auto', describe: 'auto, none (load no firewall plugin), or the kind to insist on' })
      .option('docker-socket', { type: 'string', describe: 'the container engine socket' })
      .option('interval', { type: 'number', default: 10, describe: 'reconcile at least every N seconds' })
      .option('endpoint', { type: 'string', array: true, default: [] as string[], describe: 'addresses peers reach this node at' })
      .option('tunnel', {
        type: 'string',
        choices: ['none', 'wireguard'],
        describe:
          "carry the mesh's private network in a WireGuard tunnel, or not (default: the tunnel recorded in the state folder, else wireguard in a tunnel network; the choice is recorded)",
      })
      .option('tunnel-interface', {
        type: 'string',
        describe: 'the tunnel interface name, unique on the machine (default: the recorded one, else meshp0); another than the recorded one is refused',
      })
      .option('tunnel-move', {
        type: 'boolean',
        describe: 'move the recorded tunnel to --tunnel-interface with its key (the old interface is taken down first)',
      })
      .option('tunnel-grace', { type: 'number', default: 300, describe: 'seconds an out-of-scope peer stays configured (its traffic dropped) before it goes' })
      .option('metrics-listen', { type: 'string', describe: "HOST:PORT for this agent's own Prometheus /metrics" })
      .option('advertise-route', {
        type: 'string',
        array: true,
        default: [] as string[],
        describe: 'a prefix behind this node it offers to route (repeat for more); it serves once an admin approves it (meshp route approve)',
      })
      .option('exit-node', {
        type: 'string',
        describe:
          "the exit node (a route group of 0.0.0.0/0 and ::/0) this node sends its default routes through, when the policy lets it (an admin's node exit-node setting wins)",
      })
      .demandOption('state'),
  handler: async (a) => {
    const { runAgent, tokenFrom } = await import('../remote/agent.js');
    await runAgent({
      state: a.state!,
      controller: a.controller,
      token: tokenFrom(a.token, a['token-file'], process.env.MESHP_TOKEN),
      plugin: a.plugin,
      config: a.config,
      name: a.name,
      root: a.root,
      firewall: a.firewall,
      dockerSocket: a['docker-socket'],
      intervalMs: Math.round(Math.max(0.2, a.interval) * 1000),
      endpoints: a.endpoint,
      tunnel: a.tunnel,
      tunnelInterface: a['tunnel-interface'],
      tunnelMove: a['tunnel-move'],
      tunnelGraceMs: Math.round(Math.max(0, a['tunnel-grace']) * 1000),
      metricsListen: a['metrics-listen'],
      advertiseRoutes: (a['advertise-route'] as unknown[]).map(String),
      ...(a['exit-node'] !== undefined ? { exitNode: String(a['exit-node']) } : {}),
    });
  },
};

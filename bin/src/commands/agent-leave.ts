import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';
import { pluginOptions, type PluginArgs } from './plugin-options.js';
import { changeOptions, type ChangeArgs } from './remote-options.js';

interface Args extends Omit<GlobalArgs, 'controller'>, PluginArgs, ChangeArgs {
  root: string;
  firewall: string;
  'docker-socket'?: string;
  'tunnel-interface'?: string;
}

/**
 * `meshp agent`'s own options (yargs makes a command's options its subcommands' too): not leave's.
 * Hidden from its help, and refused when given on the command line, so none is silently ignored.
 */
const RUN_ONLY = ['controller', 'token', 'token-file', 'name', 'interval', 'endpoint', 'tunnel', 'tunnel-grace', 'metrics-listen'] as const;
const camel = (k: string) => k.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());

function runOnlyGiven(argv: readonly string[]): string[] {
  const flags = new Set(argv.filter((x) => x.startsWith('--')).map((x) => x.slice(2).split('=')[0]!));
  return RUN_ONLY.filter((k) => flags.has(k) || flags.has(camel(k)));
}

/** `meshp agent leave`: what the mesh added to this machine goes, from the agent's state folder; no controller needed. */
export const agentLeaveCommand: CommandModule<GlobalArgs, Args> = {
  command: 'leave',
  describe:
    'leave the network on purpose: remove what the mesh added here (its tunnel, its marked firewall rules; a retired found firewall re-enabled), never what it found; stop the agent first',
  builder: (y) =>
    RUN_ONLY.reduce((b, k) => b.hide(k), changeOptions(pluginOptions(y)))
      .option('root', { type: 'string', default: '/', describe: 'prefix of every path the host reads or writes (as the agent was given)' })
      .option('firewall', { type: 'string', default: 'auto', describe: 'auto, none, or the kind the agent was given' })
      .option('docker-socket', { type: 'string', describe: 'the container engine socket (as the agent was given)' })
      .option('tunnel-interface', { type: 'string', describe: "the tunnel's interface (default: the one this state folder raised)" })
      .demandOption('state'),
  handler: async (a) => {
    const given = runOnlyGiven(process.argv.slice(2));
    if (given.length)
      throw Object.assign(new Error(`meshp agent leave takes no ${given.map((k) => `--${k}`).join(', ')}: it works from the state folder alone`), {
        usage: true,
      });
    const { agentLeave } = await import('../remote/leave.js');
    await agentLeave({
      state: a.state!,
      root: a.root,
      firewall: a.firewall,
      dockerSocket: a['docker-socket'],
      plugin: a.plugin,
      config: a.config,
      tunnelInterface: a['tunnel-interface'],
      preview: a.preview,
      yes: a.yes,
      json: a.json,
    });
  },
};

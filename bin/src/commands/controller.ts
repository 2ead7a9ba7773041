import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';

const serve: CommandModule<
  GlobalArgs,
  GlobalArgs & {
    listen: string;
    'metrics-listen'?: string;
    network: string[];
    'log-depth'?: number;
    'sync-flush-ms'?: number;
    store?: string;
    'streams-per-connection'?: number;
    'handshake-stale'?: number;
    'console-listen'?: string;
    'console-session'?: string;
    'console-history'?: string;
    'console-sample'?: string;
    'audit-retention'?: string;
    'ephemeral-sweep-ms'?: number;
  }
> = {
  command: 'serve',
  describe:
    'serve agents and operators: Control and Admin over TLS, state in one SQLite file in --state DIR (or a PostgreSQL database shared by replicas: --store)',
  builder: (y) =>
    y
      .option('listen', { type: 'string', demandOption: true, describe: 'HOST:PORT for agents and the CLI' })
      .option('metrics-listen', { type: 'string', describe: 'HOST:PORT for Prometheus /metrics' })
      .option('network', { type: 'string', array: true, default: ['default'], describe: 'networks to make on first start' })
      .option('log-depth', {
        type: 'number',
        describe: 'changes kept per network for deltas, set on every network at each start (an agent further behind gets a snapshot)',
      })
      .option('sync-flush-ms', {
        type: 'number',
        describe:
          "group commit of what agents were sent and acked, at most this long after it (default 1000; a crash loses at most this, agents' hellos say it again)",
      })
      .option('store', {
        type: 'string',
        describe:
          "where the controller's state lives: 'sqlite' (default: controller.db in --state DIR) or postgres://USER@HOST/DB (several replicas may share one database; docs/store-postgres.md)",
      })
      .option('streams-per-connection', {
        type: 'number',
        describe:
          'Sync streams one TLS connection may hold at once (default 4: one agent and its reconnect). Raise it only for agents reaching the controller through a proxy that carries many of them over one connection; each stream still proves its own node. Hellos and resyncs allowed per connection grow with it',
      })
      .option('handshake-stale', {
        type: 'number',
        describe:
          "seconds without a WireGuard handshake with any of its tunnel peers before a node's status is NO-HANDSHAKE instead of ok (default 205: WireGuard's 180 s after which a session's keys are refused, plus the 25 s keepalive)",
      })
      .option('console-listen', {
        type: 'string',
        describe: "HOST:PORT for the web console (HTTPS with the controller's certificate; sign in with the admin credential). Off when absent",
      })
      .option('console-session', { type: 'string', describe: 'how long a console session lasts from sign-in (90s, 15m, 1h; default 15m)' })
      .option('console-history', {
        type: 'string',
        describe: "how long the console's convergence chart keeps its samples, in the controller's store across restarts (30m, 1h, 1d; default 1h)",
      })
      .option('console-sample', { type: 'string', describe: "how often the console's convergence chart samples every node's gap (1s at least; default 5s)" })
      .option('audit-retention', {
        type: 'string',
        describe: 'how long the audit log keeps an admin change (90s, 30m, 12h, 90d; default 90d): older entries are trimmed at each change',
      })
      .option('ephemeral-sweep-ms', {
        type: 'number',
        describe:
          'how often ephemeral nodes (token create --ephemeral) are looked at (default 5000): one gone past its grace is removed at the next look (with replicas, within two)',
      })
      .demandOption('state'),
  handler: async (a) => {
    const { serveController } = await import('../remote/controller.js');
    await serveController({
      state: a.state!,
      listen: a.listen,
      metricsListen: a['metrics-listen'],
      networks: a.network,
      logDepth: a['log-depth'],
      syncFlushMs: a['sync-flush-ms'],
      store: a.store,
      streamsPerConnection: a['streams-per-connection'],
      handshakeStaleSeconds: a['handshake-stale'],
      consoleListen: a['console-listen'],
      consoleSession: a['console-session'],
      consoleHistory: a['console-history'],
      consoleSample: a['console-sample'],
      auditRetention: a['audit-retention'],
      ephemeralSweepMs: a['ephemeral-sweep-ms'],
    });
  },
};

const copyStore: CommandModule<GlobalArgs, GlobalArgs & { to: string }> = {
  command: 'copy-store',
  describe:
    "copy a stopped controller's state (controller.db in --state DIR) into an empty PostgreSQL database, all of it or none: agents keep their credentials and versions",
  builder: (y) =>
    y
      .option('to', { type: 'string', demandOption: true, describe: 'postgres://USER@HOST/DB (migrated first; refused if it holds a state already)' })
      .demandOption('state'),
  handler: async (a) => {
    const { copyStore: copy } = await import('../remote/controller.js');
    const counts = await copy(a.state!, a.to);
    process.stdout.write(
      a.json
        ? `${JSON.stringify(counts)}\n`
        : `copied ${counts.networks} network(s), ${counts.members} member(s), ${counts.log} log entries, ${counts.sync} sync records, ${counts.hosting} token/credential rows\n`,
    );
  },
};

export const controllerCommand: CommandModule<GlobalArgs, GlobalArgs> = {
  command: 'controller <command>',
  describe: 'the controller',
  builder: (y) => y.command(serve).command(copyStore).demandCommand(1),
  handler: () => undefined,
};

/**
 * The yargs factory: global options, and every command listed explicitly (no commandDir).
 * Exit status: 0 success, 1 refusal (one line on stderr), 2 usage error.
 */
import yargs, { type Argv } from 'yargs';
import { genesisCommand } from './commands/genesis.js';
import { hostCommand } from './commands/host.js';
import { agentCommand } from './commands/agent.js';
import { catalogueCommand } from './commands/catalogue.js';
import { controllerCommand } from './commands/controller.js';
import { doctorCommand } from './commands/doctor.js';
import { moduleCommand } from './commands/module.js';
import { nodeCommand } from './commands/node.js';
import { networkCommand } from './commands/network.js';
import { policyCommand } from './commands/policy.js';
import { auditCommand } from './commands/audit.js';
import { adminCommand } from './commands/admin.js';
import { dnsCommand } from './commands/dns.js';
import { routeCommand } from './commands/route.js';
import { relayCommand } from './commands/relay.js';
import { tokenCommand } from './commands/token.js';
import type { GlobalArgs } from './global-args.js';

export type { GlobalArgs } from './global-args.js';

export function createCli(argv: string[]): Argv<GlobalArgs> {
  const cli = yargs(argv);
  return (
    cli
      .scriptName('meshp')
      .option('json', { type: 'boolean', default: false, describe: 'one JSON document instead of a table' })
      .option('state', { type: 'string', describe: 'the state folder' })
      .option('controller', {
        type: 'string',
        describe: 'HOST:PORT of the controller; repeat it for replicas sharing one database: the first that answers is used',
      })
      .command(genesisCommand)
      .command(hostCommand)
      .command(controllerCommand)
      .command(agentCommand)
      .command(tokenCommand)
      .command(nodeCommand)
      .command(networkCommand)
      .command(moduleCommand)
      .command(catalogueCommand)
      .command(policyCommand)
      .command(auditCommand)
      .command(adminCommand)
      .command(dnsCommand)
      .command(routeCommand)
      .command(relayCommand)
      .command(doctorCommand)
      // yargs' own completion command prints its script even when asked for --help: the shell's
      // completions are answered through a hidden one, and `completion` is a command like the others.
      .completion('completion-script', false)
      .command(
        'completion',
        'print a bash/zsh completion script (meshp completion >> ~/.bashrc)',
        (y) => y,
        () => {
          cli.showCompletionScript();
        },
      )
      .demandCommand(1, 'name a command')
      .strict()
      .help()
      .exitProcess(false)
      .fail((msg, err) => {
        if (err) throw err;
        throw Object.assign(new Error(msg), { usage: true });
      }) as unknown as Argv<GlobalArgs>
  );
}

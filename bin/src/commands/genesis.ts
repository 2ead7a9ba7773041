import type { CommandModule } from 'yargs';
import type { GlobalArgs } from '../global-args.js';

interface Args extends GlobalArgs {
  adopted: boolean;
  port: string[];
  'private-range': string;
  catalogue?: string;
  root: string;
  'docker-socket'?: string;
  firewall: string;
  node?: string;
  listen: string;
  'private-interface'?: string;
  'tunnel-interface'?: string;
  endpoint: string[];
  images?: string;
  preview: boolean;
  yes: boolean;
}

export const genesisCommand: CommandModule<GlobalArgs, Args> = {
  command: 'genesis',
  describe: "raise the mesh on the control-node: the controller's state, this node enrolled, the foundation up",
  builder: (y) =>
    y
      .option('adopted', { type: 'boolean', default: false, describe: 'keep the machine as it is: found files, containers and firewall stay in force' })
      .option('port', { type: 'string', array: true, default: [], describe: 'NAME=PORT for a foundation port (store, bus, registry, broker)' })
      .option('private-range', { type: 'string', default: '100.96.0.0/16', describe: "the private network's range" })
      .option('catalogue', { type: 'string', describe: 'the folder of module manifests (default: the shipped catalogue, examples/catalogue)' })
      .option('images', {
        type: 'string',
        describe:
          'a JSON file of stand-ins for the catalogue\'s images, by container name ({"meshp-store": {"image": "…", "command": […]}}): image, command, env and mounts replaced, ports kept',
      })
      .option('root', { type: 'string', default: '/', describe: 'prefix of every path the host reads or writes' })
      .option('docker-socket', { type: 'string', describe: 'the Docker engine socket the foundation runs on (default /var/run/docker.sock)' })
      .option('firewall', { type: 'string', default: 'auto', describe: 'auto, or the firewall kind to insist on' })
      .option('node', { type: 'string', describe: "this node's name (default: the host name)" })
      .option('listen', {
        type: 'string',
        default: '0.0.0.0',
        describe: 'the address the controller will listen on; its port is the control port (--port control=PORT)',
      })
      .option('private-interface', {
        type: 'string',
        describe:
          'an interface that already carries the private network (its addresses are not a conflict); without it the private network is a WireGuard tunnel',
      })
      .option('tunnel-interface', { type: 'string', describe: "the tunnel's interface name when no --private-interface is given (default meshp0)" })
      .option('endpoint', { type: 'string', array: true, default: [] as string[], describe: "IP:PORT where peers reach this node's tunnel" })
      .option('preview', { type: 'boolean', default: false, describe: 'check and say what would be raised; change nothing' })
      .option('yes', { type: 'boolean', default: false, describe: 'raise without asking' })
      .demandOption('state'),
  handler: async (a) => {
    const { genesis, DEFAULT_CATALOGUE } = await import('../genesis/run.js');
    await genesis({
      state: a.state!,
      adopted: a.adopted,
      port: a.port,
      privateRange: a['private-range'],
      catalogue: a.catalogue ?? DEFAULT_CATALOGUE,
      root: a.root,
      dockerSocket: a['docker-socket'],
      firewall: a.firewall,
      node: a.node,
      listen: a.listen,
      privateInterface: a['private-interface'],
      tunnelInterface: a['tunnel-interface'],
      endpoint: a.endpoint,
      images: a.images,
      preview: a.preview,
      yes: a.yes,
      json: a.json,
    });
  },
};

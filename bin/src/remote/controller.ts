/** `meshp controller serve`: the controller plugin on a server host with the gRPC transport. */
import { Host } from '@meshp/core/host';
import { ControllerHostingPlugin } from '@meshp/controller';
import { GrpcTransportPlugin } from '@meshp/transport-grpc';

export interface ServeArgs {
  state: string;
  listen: string;
  metricsListen?: string;
  networks: string[];
  logDepth?: number;
  syncFlushMs?: number;
}

export async function serveController(a: ServeArgs): Promise<void> {
  const plugin = new ControllerHostingPlugin({ listen: a.listen, metricsListen: a.metricsListen, networks: a.networks, logDepth: a.logDepth, ...(a.syncFlushMs !== undefined ? { syncFlushMs: a.syncFlushMs } : {}) });
  new Host({ stateDir: a.state }).use(new GrpcTransportPlugin(), plugin);
  await plugin.start();
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      void plugin.stop().then(resolve);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

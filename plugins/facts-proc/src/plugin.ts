import { PLUGIN_API_VERSION, type Plugin, type PluginHost } from '@meshp/core';
import { addresses } from './addresses.js';
import { listening } from './proc-net.js';

/** Machine facts read from /proc and `ip -j`: listening sockets with their processes, addresses and routes. */
export class ProcFactsPlugin implements Plugin {
  readonly name = 'facts-proc';
  readonly apiVersion = PLUGIN_API_VERSION;

  apply(host: PluginHost): void {
    host.hooks.facts.tapPromise(this.name, async () => ({ listening, addresses }));
  }
}

import { PLUGIN_API_VERSION, type Plugin, type PluginHost } from '@meshp/core';
import { SqliteHostStore } from './host-store.js';

/** Provides the host state store: one SQLite file in the host's state folder. */
export class SqliteStatePlugin implements Plugin {
  readonly name = 'state-sqlite';
  readonly apiVersion = PLUGIN_API_VERSION;

  apply(host: PluginHost): void {
    host.hooks.state.tapPromise(this.name, async (options) => new SqliteHostStore(options.stateDir));
  }
}

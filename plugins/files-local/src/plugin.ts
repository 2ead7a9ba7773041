import { PLUGIN_API_VERSION, type Host, type Plugin } from '@meshp/core';
import { LocalFileStore } from './local-store.js';

/** Provides the file store: the local filesystem under the host's root prefix (`--root`). */
export class LocalFilesPlugin implements Plugin {
  readonly name = 'files-local';
  readonly apiVersion = PLUGIN_API_VERSION;

  apply(host: Host): void {
    host.hooks.files.tapPromise(this.name, async (options) => new LocalFileStore(options.root));
  }
}

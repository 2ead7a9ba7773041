import { PLUGIN_API_VERSION, type Plugin, type PluginHost } from '@meshp/core';
import { LocalFileStore, type LocalFileStoreOptions } from './local-store.js';

/** The size limit from the environment, when set: an operator's agent may hold larger files. */
function maxFromEnv(): number | undefined {
  const raw = process.env.MESHP_MAX_FILE_BYTES;
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  return Number.isSafeInteger(n) && n > 0 ? n : undefined;
}

/** Provides the file store: the local filesystem under the host's root prefix (`--root`). */
export class LocalFilesPlugin implements Plugin {
  readonly name = 'files-local';
  readonly apiVersion = PLUGIN_API_VERSION;

  constructor(private readonly options: LocalFileStoreOptions = {}) {}

  apply(host: PluginHost): void {
    const maxFileBytes = this.options.maxFileBytes ?? maxFromEnv();
    host.hooks.files.tapPromise(this.name, async (options) => new LocalFileStore(options.root, maxFileBytes === undefined ? {} : { maxFileBytes }));
  }
}

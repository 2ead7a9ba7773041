import type { Argv } from 'yargs';

/** `--plugin MODULE[=OPTIONS_JSON]` (repeatable) and `--config FILE`, on `meshp host …` and `meshp agent`. */
export interface PluginArgs {
  plugin?: string[];
  config?: string;
}

export function pluginOptions<T>(y: Argv<T>): Argv<T & PluginArgs> {
  return y
    .option('plugin', {
      type: 'string',
      array: true,
      describe: 'load a plugin besides the default ones: an npm package name or a path, optionally =OPTIONS_JSON (repeatable)',
    })
    .option('config', { type: 'string', describe: 'a JSON file whose "plugins" list is loaded like --plugin' }) as Argv<T & PluginArgs>;
}

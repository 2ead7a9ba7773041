export { UfwPlugin, type UfwPluginOptions } from './plugin.js';
export { UfwDriver, type UfwDriverOptions } from './driver.js';
export { parseTuples, ruleWords, type UfwRule } from './tuples.js';
/** What `--plugin` loads: the plugin class, made with the options given after `=`. */
export { UfwPlugin as default } from './plugin.js';

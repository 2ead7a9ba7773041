export { UfwPlugin, type UfwPluginOptions } from './plugin.js';
export { UfwDriver, type UfwDriverOptions } from './driver.js';
export { parseTuples, ruleWords, type UfwRule } from './tuples.js';

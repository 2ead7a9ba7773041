export { createCli } from './cli.js';
export { assembleHost, defaultPlugins } from './host/assembly.js';

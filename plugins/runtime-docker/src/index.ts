export { DockerPlugin, type DockerPluginOptions } from './plugin.js';
export { DockerRuntime, DEFAULT_DOCKER_SOCKET, asideName, type DockerRuntimeOptions } from './runtime.js';
export { specHash, canonicalJson } from './spec-hash.js';
export { createOptions, markLabels } from './create-options.js';
export { classify as classifyEngineError } from './engine-errors.js';
export { infoFromInspect, infoFromList, portsFromInspect, portsFromList } from './info.js';

export { LocalFileStore } from './local-store.js';
export { LocalFilesPlugin } from './plugin.js';

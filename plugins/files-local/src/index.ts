export { DEFAULT_MAX_FILE_BYTES, LocalFileStore, type LocalFileStoreOptions } from './local-store.js';
export { LocalFilesPlugin } from './plugin.js';

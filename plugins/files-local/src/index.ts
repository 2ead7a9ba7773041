export { DEFAULT_MAX_FILE_BYTES, LocalFileStore, type LocalFileStoreOptions } from './local-store.js';
export { LocalFilesPlugin } from './plugin.js';
/** The renameat2 calls, exported so a test can inject a fault at the exact point of a write. */
export { sys as renameSys, type RenameResult } from './rename.js';

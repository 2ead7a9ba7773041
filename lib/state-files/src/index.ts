// @meshp/state-files: private state folders and database files, for the packages that keep state on
// disk (the host's state store, the controller's SQLite store, the CLI's plugin loader). Kept out of
// core, which does no I/O.
export { privateDir, privateDbFiles, trustedFile, sayTightened } from './private.js';

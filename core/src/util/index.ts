// @meshp/core/util: small helpers several packages share — text made safe for a terminal or a log,
// private folders and database files, and one line for any thrown value.
export { sanitize, logOptions } from './sanitize.js';
export { privateDir, privateDbFiles, trustedFile, sayTightened } from './private.js';
export { oneLine } from '../errors.js';

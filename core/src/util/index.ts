// @meshp/core/util: small helpers several packages share — text made safe for a terminal or a log,
// and one line for any thrown value. (Private state folders and files, which need the file system,
// are `@meshp/state-files`: core does no I/O.)
export { sanitize, logOptions } from './sanitize.js';
export { oneLine } from '../errors.js';

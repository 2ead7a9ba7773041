// @meshp/core/util: small helpers several packages share — text made safe for a terminal or a log,
// one line for any thrown value, and one factory per refusal raised from several sites (its code
// follows from the condition; the root keeps only MeshpError and CODES, the contract). (Private
// state folders and files, which need the file system, are `@meshp/state-files`: core does no I/O.)
export { sanitize, logOptions } from './sanitize.js';
export { oneLine } from '../errors.js';
export { usage, notFound, nameTaken, tokenInvalid, malformed, inputTooLarge, providerMissing } from '../conditions.js';

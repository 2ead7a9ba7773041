// @meshp/core/store: what the controller's store implementations share beside the seam
// (core/src/contract/store.ts): enrolment tokens' rows and ids, the hash of a secret, the hosting's tables.
export { hashSecret, TOKEN_ID_CHARS, tokenId, idRange, tokenFromRow, revokeRow, revokeRowAsync, newestFirst, HOSTING_TABLES } from './token-rows.js';

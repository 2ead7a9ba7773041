// The token rows both controller stores share are core's (@meshp/core/store, the seam's types in
// core/src/contract/store.ts); named here too for the controller's importers.
export { TOKEN_ID_CHARS, idRange, newestFirst, revokeRow, tokenFromRow, tokenId } from '@meshp/core/store';
export type { TokenInfo, TokenRevocation, TokenRow } from '@meshp/core';

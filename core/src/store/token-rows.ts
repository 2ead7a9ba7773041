/**
 * Enrolment tokens as the operator reads them back: by an id that is the start of the hash of the
 * secret (the secret itself is never stored, so never shown), with what became of each. Shared by
 * the controller's SQLite AuthStore and store-postgres's: the rows have the same columns in both.
 */
import { createHash } from 'node:crypto';
import { MeshpError } from '../errors.js';
import { notFound, usage } from '../conditions.js';
import type { StoredToken, TokenInfo, TokenRevocation, TokenRow } from '../contract/store.js';

/** The hash a secret (a token, a credential) is kept by. */
export const hashSecret = (s: string): string => createHash('sha256').update(s).digest('hex');

/** A token's id: the start of the hash of its secret (64 bits: enough to name one, nothing to enrol with). */
export const TOKEN_ID_CHARS = 16;
export const tokenId = (hash: string): string => hash.slice(0, TOKEN_ID_CHARS);
/** The hashes an id names, as a range (an index range on the primary key, in SQLite and PostgreSQL alike: hex sorts before 'g'). */
export const idRange = (id: string): [string, string] => [id, `${id}g`];

/** One token from a row of hosting_tokens (the SQLite and PostgreSQL stores' rows have the same columns). */
export function tokenFromRow(r: TokenRow): TokenInfo {
  return {
    id: tokenId(r.hash),
    network: r.network,
    mode: r.mode,
    tags: JSON.parse(r.tags) as string[],
    fingerprint: r.fingerprint,
    expiresAt: r.expires_at,
    usedAt: r.used_at,
    usedBy: r.used_by,
    usedKey: r.used_key,
    confirmedAt: r.confirmed_at,
    revokedAt: r.revoked_at ?? null,
    createdAt: r.created_at ?? null,
    maxUses: r.max_uses ?? null,
    uses: Number(r.uses ?? 0),
    ephemeralSeconds: r.ephemeral_seconds ?? null,
  };
}

/**
 * The revocation both stores make, given their token's row by id: refused for an id that names no
 * token or several (MESHP_NOT_FOUND, MESHP_USAGE) and for a used one (MESHP_TOKEN_USED: it enrols
 * no one else already; the node is removed with `node remove`). `revoke` marks the row unless it was
 * used in between (single use: the row's update decides), and answers whether it did.
 */
export function revokeRow(
  rows: TokenRow[],
  network: string,
  id: string,
  revoke: (hash: string) => boolean,
  reread: (hash: string) => TokenRow | undefined,
): TokenRevocation {
  const row = revocableRow(rows, network, id);
  if (row.revoked_at) return { token: tokenFromRow(row), revoked: false };
  if (revoke(row.hash)) return { token: tokenFromRow(reread(row.hash)!), revoked: true };
  return notRevoked(reread(row.hash)!);
}

/** `revokeRow` for a store read and written without waiting (store-postgres). */
export async function revokeRowAsync(
  rows: TokenRow[],
  network: string,
  id: string,
  revoke: (hash: string) => Promise<boolean>,
  reread: (hash: string) => Promise<TokenRow | undefined>,
): Promise<TokenRevocation> {
  const row = revocableRow(rows, network, id);
  if (row.revoked_at) return { token: tokenFromRow(row), revoked: false };
  if (await revoke(row.hash)) return { token: tokenFromRow((await reread(row.hash))!), revoked: true };
  return notRevoked((await reread(row.hash))!);
}

/** The one row of the network the id names, not used. */
function revocableRow(rows: TokenRow[], network: string, id: string): TokenRow {
  if (!/^[0-9a-f]{1,64}$/.test(id)) throw usage(`token id ${JSON.stringify(id)} is not one (${TOKEN_ID_CHARS} hex digits, as \`meshp token list\` shows)`);
  const mine = rows.filter((r) => r.network === network);
  if (mine.length === 0) throw notFound('token', id, network);
  if (mine.length > 1) throw usage(`token id ${id} names ${mine.length} tokens: give more of it`);
  const row = mine[0]!;
  if (row.used_at || (row.max_uses != null && Number(row.uses ?? 0) >= row.max_uses)) throw usedError(row);
  return row;
}

/** The row as it is after a revocation that did not take: used in between, or revoked by another. */
function notRevoked(now: TokenRow): TokenRevocation {
  if (now.used_at) throw usedError(now);
  return { token: tokenFromRow(now), revoked: false };
}

const usedError = (r: TokenRow) =>
  r.max_uses != null
    ? new MeshpError(
        'MESHP_TOKEN_USED',
        `reusable token ${tokenId(r.hash)} was used ${r.uses ?? 0} of ${r.max_uses} time(s): it enrols no one else; to take a node out: meshp node remove NODE --yes`,
      )
    : new MeshpError(
        'MESHP_TOKEN_USED',
        `token ${tokenId(r.hash)} was used by node ${r.used_by} at ${r.used_at}: it enrols no one else; to take the node out: meshp node remove ${r.used_by} --yes`,
      );

/** Newest first by creation; tokens without a creation time last, by expiry. */
export function newestFirst(a: StoredToken, b: StoredToken): number {
  return (b.createdAt ?? '').localeCompare(a.createdAt ?? '') || b.expiresAt.localeCompare(a.expiresAt);
}

/** The hosting's tables, in the order a copy writes them. */
export const HOSTING_TABLES = [
  'hosting_tokens',
  'hosting_credentials',
  'hosting_reports',
  'hosting_revoked_keys',
  'hosting_renames',
  'hosting_token_uses',
] as const;

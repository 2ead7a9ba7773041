/**
 * One-time enrolment tokens. Only a token's hash is kept, in memory and on disk: a copy of the
 * state enrols no one.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { Mode, TokenRecord } from '@meshp/core';
import type { CommittedStore } from './controller/committed.js';
import { tokenInvalid } from '@meshp/core/util';

export type { TokenRecord } from '@meshp/core';

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * The tokens are the committed image's (controller/committed.ts): one made, or taken, is changed
 * there only once its transaction committed, so a refused write leaves the book as it was.
 */
export class TokenBook {
  constructor(
    private readonly store: CommittedStore,
    private readonly now: () => string,
  ) {}

  /** A new token for `network`; the record returned carries the token itself, the one kept only its hash. */
  create(network: string, options: { mode?: Mode; tags?: string[]; ttlSeconds?: number; ephemeralSeconds?: number } = {}): TokenRecord {
    const t: TokenRecord = {
      token: randomBytes(24).toString('base64url'),
      network,
      mode: options.mode ?? 'converged',
      tags: [...new Set(options.tags ?? [])].sort(),
      expiresAt: new Date(Date.parse(this.now()) + (options.ttlSeconds ?? 3600) * 1000).toISOString(),
      ...(options.ephemeralSeconds ? { ephemeralSeconds: options.ephemeralSeconds } : {}),
    };
    const kept = { ...t, token: tokenHash(t.token) };
    this.store.transaction(() => this.store.putToken(kept));
    // Taken in the same change, before its commit reached the image (an enrolment through a store across the network).
    this.#made.set(kept.token, kept);
    return t;
  }

  /** Tokens made here, by hash, until taken: the image holds a token only once its transaction committed. */
  readonly #made = new Map<string, TokenRecord>();

  /** Uses the token up: its record, or MESHP_TOKEN_INVALID when it is unknown or expired. */
  take(token: string): TokenRecord {
    const key = tokenHash(token);
    const t = this.store.image.tokens.get(key) ?? this.#made.get(key);
    for (const [k, x] of this.#made) if (Date.parse(x.expiresAt) < Date.parse(this.now())) this.#made.delete(k);
    if (!t || Date.parse(t.expiresAt) < Date.parse(this.now())) throw tokenInvalid('the token is unknown or expired');
    this.#made.delete(key);
    this.store.transaction(() => this.store.deleteToken(key));
    return structuredClone(t);
  }
}

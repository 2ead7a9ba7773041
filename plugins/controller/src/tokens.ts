/**
 * One-time enrolment tokens. Only a token's hash is kept, in memory and on disk: a copy of the
 * state enrols no one.
 */
import { createHash, randomBytes } from 'node:crypto';
import type { ControllerStore, Mode, TokenRecord } from '@meshp/core';
import { tokenInvalid } from '@meshp/core/util';

export type { TokenRecord } from '@meshp/core';

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

export class TokenBook {
  readonly #byHash = new Map<string, TokenRecord>();

  constructor(
    private readonly store: ControllerStore,
    private readonly now: () => string,
    kept: readonly TokenRecord[] = [],
  ) {
    for (const t of kept) this.#byHash.set(t.token, t);
  }

  /** A new token for `network`; the record returned carries the token itself, the one kept only its hash. */
  create(network: string, options: { mode?: Mode; tags?: string[]; ttlSeconds?: number } = {}): TokenRecord {
    const t: TokenRecord = {
      token: randomBytes(24).toString('base64url'),
      network,
      mode: options.mode ?? 'converged',
      tags: [...new Set(options.tags ?? [])].sort(),
      expiresAt: new Date(Date.parse(this.now()) + (options.ttlSeconds ?? 3600) * 1000).toISOString(),
    };
    const kept = { ...t, token: tokenHash(t.token) };
    this.#byHash.set(kept.token, kept);
    this.store.transaction(() => this.store.putToken(kept));
    return t;
  }

  /** Uses the token up: its record, or MESHP_TOKEN_INVALID when it is unknown or expired. */
  take(token: string): TokenRecord {
    const key = tokenHash(token);
    const t = this.#byHash.get(key);
    if (!t || Date.parse(t.expiresAt) < Date.parse(this.now())) throw tokenInvalid('the token is unknown or expired');
    this.#byHash.delete(key);
    this.store.transaction(() => this.store.deleteToken(key));
    return t;
  }
}

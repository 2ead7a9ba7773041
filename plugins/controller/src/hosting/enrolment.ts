/**
 * Tokens and enrolment over the Controller: the operator's token is `meshp1.<claims>.<secret>`, the
 * hosting stores only the secret's hash. A valid token is exchanged, on the spot, for a one-minute
 * controller token that `Controller.enrol` consumes (the mode comes from the token, ADR 0002).
 */
import { createPublicKey, randomBytes } from 'node:crypto';
import { MeshpError, type EnrolFacts, type EnrolInput, type EnrolResult, type Mode, type StoredToken } from '@meshp/core';
import { decodeToken, encodeToken } from '@meshp/core/agent';
import type { Controller } from '../controller.js';
import { hashSecret, type AuthBook } from './auth-store.js';
import { tokenId, type TokenInfo, type TokenRevocation } from './token-rows.js';
import { checkMember } from '../limits.js';
import { checkTunnelKey } from '../tunnel-key.js';
import { nameTaken, notFound, tokenInvalid, usage } from '@meshp/core/util';

export const NODE_NAME = /^[a-z0-9][a-z0-9_.-]{0,62}$/i;

export interface TokenRequest {
  network: string;
  mode: Mode;
  ttlSeconds: number;
  tags: string[];
  /** issue 28 (ADR 0042): a reusable token, enrolling up to this many nodes (absent or null: one). */
  maxUses?: number | null;
  /** The nodes it enrols are ephemeral: removed after this many seconds without a stream (absent or null: kept). */
  ephemeralSeconds?: number | null;
}

/** The most nodes one reusable token may enrol, and the longest an ephemeral node's grace. */
export const MAX_TOKEN_USES = 10_000;
export const MAX_EPHEMERAL_GRACE_SECONDS = 30 * 86400;

/** A token made: what the operator is given (the secret only in `token`). */
export interface MadeToken {
  token: string;
  expiresAt: string;
  id: string;
}

export class Enrolment {
  constructor(
    private readonly controller: Controller,
    private readonly auth: AuthBook,
    private readonly fingerprint: string,
    private readonly now: () => Date = () => new Date(),
  ) {}

  createToken(r: TokenRequest): MadeToken {
    const { secret, row, made } = this.#mint(r);
    this.auth.putToken(secret, row);
    return made;
  }

  /** Whether tokens are written and read without the event loop waiting (a store across the network). */
  get asyncTokens(): boolean {
    return !!this.auth.putTokenAsync;
  }

  async createTokenAsync(r: TokenRequest): Promise<MadeToken> {
    const { secret, row, made } = this.#mint(r);
    await this.auth.putTokenAsync!(secret, row);
    return made;
  }

  #mint(r: TokenRequest) {
    if (!this.controller.networks().includes(r.network)) throw notFound('network', r.network);
    if (!(r.ttlSeconds > 0 && r.ttlSeconds <= 30 * 86400)) throw usage('a token lives between 1 s and 30 days');
    const maxUses = r.maxUses ?? null;
    if (maxUses !== null && !(Number.isInteger(maxUses) && maxUses >= 1 && maxUses <= MAX_TOKEN_USES))
      throw usage(`a reusable token enrols between 1 and ${MAX_TOKEN_USES} nodes (--uses ${maxUses})`);
    const ephemeralSeconds = r.ephemeralSeconds ?? null;
    if (ephemeralSeconds !== null && !(Number.isInteger(ephemeralSeconds) && ephemeralSeconds >= 1 && ephemeralSeconds <= MAX_EPHEMERAL_GRACE_SECONDS))
      throw usage(`an ephemeral node's grace is between 1 s and 30 days (--grace ${ephemeralSeconds}s)`);
    const secret = randomBytes(32).toString('base64url');
    const expiresAt = new Date(this.now().getTime() + r.ttlSeconds * 1000).toISOString();
    const row = {
      network: r.network,
      mode: r.mode,
      tags: r.tags,
      fingerprint: this.fingerprint,
      expiresAt,
      createdAt: this.now().toISOString(),
      maxUses,
      ephemeralSeconds,
    };
    // A tunnel network's token says so: the agent then raises the tunnel without being told (issue 33).
    const tunnel = this.controller.isTunnelNetwork(r.network) ? { tunnel: 'wireguard' as const } : {};
    const made = {
      token: encodeToken({ network: r.network, adopted: r.mode === 'adopted', fingerprint: this.fingerprint, ...tunnel }, secret),
      expiresAt,
      id: tokenId(hashSecret(secret)),
    };
    return { secret, row, made };
  }

  /** The network's tokens, by id (never the secret): `meshp token list`. */
  listTokens(network: string): TokenInfo[] {
    if (!this.controller.networks().includes(network)) throw notFound('network', network);
    return this.auth.listTokens(network);
  }

  async listTokensAsync(network: string): Promise<TokenInfo[]> {
    if (!this.controller.networks().includes(network)) throw notFound('network', network);
    return this.auth.listTokensAsync!(network);
  }

  /** `meshp token revoke ID`: an unused token enrols no one from now on (a used one is refused MESHP_TOKEN_USED). */
  revokeToken(network: string, id: string): TokenRevocation {
    if (!this.controller.networks().includes(network)) throw notFound('network', network);
    return this.auth.revokeToken(network, id, this.now().toISOString());
  }

  async revokeTokenAsync(network: string, id: string): Promise<TokenRevocation> {
    if (!this.controller.networks().includes(network)) throw notFound('network', network);
    return this.auth.revokeTokenAsync!(network, id, this.now().toISOString());
  }

  /**
   * Atomic from the node's side: the token is marked used with the node's key, the node joins and
   * its credential is stored, and the answer carries the credential. If that answer is lost (a
   * deadline, a dropped connection), the node retries with the same token and the same key and gets
   * a new credential for the same membership (the one never received is replaced); the token is
   * spent for good only when the node first opens a stream with its credential (`AuthStore.confirm`).
   * A retry with another key is refused (MESHP_TOKEN_INVALID), so no one else completes it.
   * `resumed`: this call completed an earlier enrolment (nothing changed in the network).
   */
  enrol(input: EnrolInput): EnrolResult & { resumed: boolean } {
    const { secret } = decodeToken(input.token);
    const token = this.auth.getToken(secret);
    const facts: EnrolFacts = {
      token,
      revoked: token ? this.auth.revokedKey(token.network, input.nodeKey) : null,
      use: token?.maxUses != null ? this.auth.tokenUse(secret, input.nodeKey) : null,
    };
    const { t, retry } = this.#tokenChecks(input, facts);
    if (retry) {
      const holder = this.controller.memberByKey(t.network, input.nodeKey);
      if (holder) return { ...this.#credential(t.network, holder.id), resumed: true };
      // Marked used but never joined (the controller stopped in between): the enrolment goes on below.
    }
    this.#memberChecks(input, t, facts.revoked);
    if (!retry) {
      const at = this.now().toISOString();
      if (t.maxUses != null) {
        if (!this.auth.takeUse(secret, input.node, at, input.nodeKey)) throw usedUp(t, secret);
      } else if (!this.auth.markUsed(secret, input.node, at, input.nodeKey)) throw tokenInvalid('the enrolment token was already used');
      this.auth.pendingAdded();
    }
    const { network, member } = this.#join(input, t);
    return { ...this.#credential(network, member.id), resumed: false };
  }

  /** Whether enrolments are read and written without the event loop waiting (a store across the network). */
  get asyncStore(): boolean {
    return !!this.auth.enrolFactsAsync && this.controller.asyncStore;
  }

  /**
   * `enrol` on a store across the network, without the event loop waiting (issue 24): the token
   * read, checked against memory, marked used, the join committed as one change (its checks made
   * again there, after catching up), the credential stored. Atomic from the node's side as `enrol`:
   * a join refused after the token was marked used is completed by the node's retry with its key.
   */
  async enrolAsync(input: EnrolInput): Promise<EnrolResult & { resumed: boolean }> {
    const auth = this.auth;
    const { secret } = decodeToken(input.token);
    const facts = await auth.enrolFactsAsync!(secret, input.nodeKey);
    const { t, retry } = this.#tokenChecks(input, facts);
    if (retry) {
      const holder = this.controller.memberByKey(t.network, input.nodeKey);
      if (holder) return { ...(await this.#credentialAsync(t.network, holder.id)), resumed: true };
    }
    this.#memberChecks(input, t, facts.revoked);
    if (!retry) {
      const at = this.now().toISOString();
      // A reusable token: the count's conditional update decides, whichever replica asks (store-postgres takeUseStmt).
      if (t.maxUses != null) {
        if (!(await auth.takeUseAsync!(secret, input.node, at, input.nodeKey))) throw usedUp(t, secret);
      } else if (!(await auth.markUsedAsync!(secret, input.node, at, input.nodeKey))) throw tokenInvalid('the enrolment token was already used');
    }
    const { network, member } = await this.controller.change(() => {
      // Another replica may have enrolled this name or key meanwhile: this one's memory, caught up, decides.
      this.#memberChecks(input, t, facts.revoked);
      return this.#join(input, t);
    });
    return { ...(await this.#credentialAsync(network, member.id)), resumed: false };
  }

  /** The token as the enrolment may use it (`retry`: it completes one whose answer was lost); refused otherwise. */
  #tokenChecks(input: EnrolInput, facts: EnrolFacts): { t: StoredToken; retry: boolean } {
    const { claims, secret } = decodeToken(input.token);
    const t = facts.token;
    if (!t) throw tokenInvalid('the enrolment token is unknown (forged, or from another controller)');
    if (t.network !== claims.network || (t.mode === 'adopted') !== claims.adopted || t.fingerprint !== claims.fingerprint) {
      throw tokenInvalid('the enrolment token claims were altered');
    }
    // Revoked by the operator (`meshp token revoke`) before any use: it enrols no one.
    if (t.revokedAt) throw tokenInvalid(`the enrolment token ${tokenId(hashSecret(secret))} was revoked at ${t.revokedAt}`);
    if (t.maxUses != null) return this.#reusableChecks(input, t, facts, secret);
    const retry = t.usedAt !== null && t.confirmedAt === null && t.usedKey === input.nodeKey;
    if (t.usedAt && !retry) {
      const how = t.usedKey && t.usedKey !== input.nodeKey ? ' with another key' : '';
      throw tokenInvalid(`the enrolment token was already used (by ${t.usedBy} at ${t.usedAt}${how})`);
    }
    // A retry completes an enrolment made before the expiry; a first use must be before it.
    if (!retry && Date.parse(t.expiresAt) <= this.now().getTime()) throw tokenInvalid(`the enrolment token expired at ${t.expiresAt}`);
    checkNodeKey(input.nodeKey);
    return { t, retry };
  }

  /**
   * A reusable token (issue 28): the use this node key made of it, whose answer was lost, is
   * completed (`retry`); a key that enrolled with it already and opened its stream is refused; a
   * first use needs a use left (MESHP_TOKEN_USED_UP) and the token unexpired.
   */
  #reusableChecks(input: EnrolInput, t: StoredToken, facts: EnrolFacts, secret: string): { t: StoredToken; retry: boolean } {
    const use = facts.use ?? null;
    const retry = use !== null && use.confirmedAt === null;
    if (use && !retry) throw tokenInvalid(`this node key enrolled with the token already (as ${use.node} at ${use.usedAt})`);
    if (!retry && (t.uses ?? 0) >= t.maxUses!) throw usedUp(t, secret);
    if (!retry && Date.parse(t.expiresAt) <= this.now().getTime()) throw tokenInvalid(`the enrolment token expired at ${t.expiresAt}`);
    checkNodeKey(input.nodeKey);
    return { t, retry };
  }

  /** The node as the network may take it (its name, its keys), checked against memory before the token is spent. */
  #memberChecks(input: EnrolInput, t: StoredToken, revoked: EnrolFacts['revoked']): void {
    if (!NODE_NAME.test(input.node)) throw usage(`node name ${JSON.stringify(input.node)} is not valid`);
    checkMember({ id: input.node, endpoints: input.endpoints, tags: t.tags }); // before the token is marked used
    if (revoked)
      throw new MeshpError('MESHP_NODE_REVOKED', `this node key was revoked in ${t.network} when ${revoked.node} was removed (${revoked.at}): make a new key`);
    // Checked before the token is spent: a refused key leaves the token for a corrected start.
    if (input.tunnelKey) checkTunnelKey(input.tunnelKey, this.controller.members(t.network), input.node);
    const holder = this.controller.memberByKey(t.network, input.nodeKey);
    if (holder) throw new MeshpError('MESHP_KEY_IN_USE', `node ${holder.id} in ${t.network} is enrolled with this key already: one key per node`);
    if (this.controller.member(t.network, input.node)) {
      // Refused before the token is marked used: the same token enrols this machine under another name.
      let n = 2;
      while (this.controller.member(t.network, `${input.node}-${n}`)) n++;
      throw nameTaken(input.node, t.network, `the token is not spent: start this agent again with --name ${input.node}-${n} (or another name)`);
    }
  }

  /** The node joins the network, through a one-minute controller token of the token's mode and tags. */
  #join(input: EnrolInput, t: StoredToken): { network: string; member: { id: string } } {
    const inner = this.controller.createToken(t.network, {
      mode: t.mode,
      tags: t.tags,
      ttlSeconds: 60,
      ...(t.ephemeralSeconds ? { ephemeralSeconds: t.ephemeralSeconds } : {}),
    });
    return this.controller.enrol(inner.token, {
      id: input.node,
      nodeKey: input.nodeKey,
      endpoints: input.endpoints,
      ...(input.tunnelKey ? { tunnelKey: input.tunnelKey } : {}),
    });
  }

  /** A new credential for the member (one lost before it arrived is replaced: one credential per node). */
  #credential(network: string, id: string): EnrolResult {
    const { result, credential } = this.#newCredential(network, id);
    this.auth.putCredential(credential, network, result.node);
    return result;
  }

  async #credentialAsync(network: string, id: string): Promise<EnrolResult> {
    const { result, credential } = this.#newCredential(network, id);
    await this.auth.putCredentialAsync!(credential, network, result.node);
    return result;
  }

  #newCredential(network: string, id: string): { result: EnrolResult; credential: string } {
    const member = this.controller.member(network, id)!;
    const credential = randomBytes(32).toString('base64url');
    return { credential, result: { network, node: member.id, credential, mode: member.mode, addresses: [...member.addresses] } };
  }
}

/** A reusable token with no use left (or revoked in the same moment): refused, coded, nothing changed. */
function usedUp(t: StoredToken, secret: string): MeshpError {
  return new MeshpError(
    'MESHP_TOKEN_USED_UP',
    `reusable token ${tokenId(hashSecret(secret))} has enrolled ${t.maxUses} of ${t.maxUses} node(s) it may: make another (meshp token create --reusable --uses N)`,
  );
}

/** An Ed25519 public key, SPKI DER in base64. */
export function checkNodeKey(nodeKey: string): void {
  try {
    const k = createPublicKey({ key: Buffer.from(nodeKey, 'base64'), format: 'der', type: 'spki' });
    if (k.asymmetricKeyType === 'ed25519') return;
  } catch {
    // refused below
  }
  throw usage('the node key is not an Ed25519 public key (SPKI DER, base64)');
}

/**
 * `meshp token create` as the admin API takes it (issue 28, ADR 0042): the mode, the time to live,
 * the tags (of a policy's form; never the control-node's, which genesis alone gives), and whether
 * the token is reusable (with its count of uses) and ephemeral (with the grace its nodes get without
 * a stream). One reading for the call answered at once and the one answered without waiting.
 */
import { MeshpError } from '@meshp/core';
import { CONTROL_NODE_TAG, WIRE_MODE, modeFromWire } from '@meshp/core/delta';
import { usage } from '@meshp/core/util';
import type { AdminRequest } from '@meshp/protocol';
import type { TokenRequest } from './enrolment.js';
import { checkedTags } from './tags-admin.js';

/** A reusable token asked without a count enrols this many nodes. */
export const DEFAULT_TOKEN_USES = 10;
/** An ephemeral token asked without a grace: its nodes are removed after 30 minutes without a stream. */
export const DEFAULT_EPHEMERAL_GRACE_SECONDS = 30 * 60;

/** The tags a token gives, checked: bounded, of a policy's form (MESHP_USAGE), not the control-node's (MESHP_TAG_RESERVED). */
export function tokenTags(tags: readonly string[]): string[] {
  if (tags.includes(CONTROL_NODE_TAG))
    throw new MeshpError(
      'MESHP_TAG_RESERVED',
      `the tag ${CONTROL_NODE_TAG} is the control-node's, given at genesis: no token gives it (every member's filter opens to its holder); no token was made`,
    );
  return checkedTags(tags);
}

export function tokenRequest(r: AdminRequest<'createToken'>, network: string): TokenRequest {
  if (!r.reusable && r.maxUses) throw usage('a count of uses (--uses) is for a reusable token: add --reusable');
  if (!r.ephemeral && r.ephemeralGraceSeconds) throw usage("a grace (--grace) is for an ephemeral token's nodes: add --ephemeral");
  return {
    network,
    mode: r.mode === WIRE_MODE.UNSPECIFIED ? 'converged' : modeFromWire(r.mode),
    ttlSeconds: r.ttlSeconds || 3600,
    tags: tokenTags(r.tags),
    maxUses: r.reusable ? r.maxUses || DEFAULT_TOKEN_USES : null,
    ephemeralSeconds: r.ephemeral ? r.ephemeralGraceSeconds || DEFAULT_EPHEMERAL_GRACE_SECONDS : null,
  };
}

/** What a Controller is made with, and what a node joins with (controller.ts re-exports them). */
import type { Mode } from '@meshp/core';
import type { MemberRecord, ResyncBounds } from '@meshp/core/delta';

export interface ControllerOptions {
  /** Changes kept per network for deltas; an agent further behind gets a snapshot. */
  logDepth?: number;
  /** Deltas sent kept per membership, for doctor. */
  keepSent?: number;
  /**
   * Signs (network, to_version, state_hash) of every delta sent, and checks the signature a hello
   * presents for a version past the network's. Without one, such a hello is taken on trust (a
   * library use; the hosted controller always has one).
   */
  signer?: VersionSigner;
  /** Backoff between snapshots asked for in a row, and how many before a membership is diverged. */
  resync?: Partial<ResyncBounds>;
  now?: () => string;
  /**
   * Group commit of sync records (what each node was sent, what it acked, its last report): written
   * together at most this long (ms) after the first change among them, in one transaction, never one
   * write per ack. 0 (the default for a library use): each is written at once. See `flushSync`
   * (group-commit.ts).
   */
  syncFlushMs?: number;
}

export interface VersionSigner {
  sign(payload: Uint8Array): Uint8Array;
  verify(payload: Uint8Array, signature: Uint8Array): boolean;
}

export interface MemberInput {
  id: string;
  nodeKey: string;
  addresses?: string[];
  tags?: string[];
  endpoints?: string[];
  mode?: Mode;
  settings?: MemberRecord['settings'];
  /** The node's WireGuard public key (base64), when it runs a tunnel. */
  tunnelKey?: string;
  /** When its credential expires, and since when its term runs (an enrolment: members.ts expiryAtEnrolment). */
  expiresAt?: string;
  renewedAt?: string;
  /** issue 28: an ephemeral member, removed after this many seconds without a stream (its token's). */
  ephemeralSeconds?: number;
}

/**
 * What a failed batch means for the operator, by its condition: the database unreachable or timed
 * out (MESHP_STORE_UNAVAILABLE: wait, it comes back), its disk full (MESHP_STORE_FULL: make room),
 * its data or an index damaged (MESHP_STATE_CORRUPT: the only one that calls for a restore), or a
 * statement refused for any other reason (MESHP_STORE_REFUSED: read the database's log for the
 * SQLSTATE). A condition not known here is a refusal, never damage: an operator told "corrupt"
 * restores from a backup for no reason.
 */
import type { ErrorCode } from '@meshp/core';

/**
 * The SQLSTATEs (https://www.postgresql.org/docs/15/errcodes-appendix.html) and Node errno names
 * that say the database could not be talked to, or not now: the next attempt may well succeed.
 */
function unavailable(state: string): boolean {
  return (
    state === '' || // the connection ended with no code ("Connection terminated unexpectedly", a client timeout)
    /^E[A-Z0-9]+$/.test(state) || // Node's errno names: ECONNREFUSED, ECONNRESET, ETIMEDOUT, ENOENT (a unix socket gone), EHOSTUNREACH…
    state.startsWith('08') || // connection exception
    state.startsWith('57P') || // the server shutting down, crashed, starting, the database dropped
    state === '57014' || // query_canceled: our statement_timeout
    state === '55P03' || // lock_not_available: our lock_timeout (another replica holds the store's lock)
    state === '25P03' || // idle_in_transaction_session_timeout
    state === '53000' || // insufficient_resources
    state === '53200' || // out_of_memory
    state === '53300' || // too_many_connections
    state === '40001' || // serialization_failure: the transaction may be tried again
    state === '40P01' // deadlock_detected: the same
  );
}

export function codeOf(state: string): ErrorCode {
  if (unavailable(state)) return 'MESHP_STORE_UNAVAILABLE';
  if (state === '53100') return 'MESHP_STORE_FULL'; // disk_full
  if (state === 'XX001' || state === 'XX002') return 'MESHP_STATE_CORRUPT'; // data_corrupted, index_corrupted
  return 'MESHP_STORE_REFUSED';
}

/** The connection itself is gone (or never made): the database counts as down until a probe reaches it again. */
export function connectionLost(state: string): boolean {
  return state === '' || /^E[A-Z0-9]+$/.test(state) || state.startsWith('08') || state.startsWith('57P') || state === '53300';
}

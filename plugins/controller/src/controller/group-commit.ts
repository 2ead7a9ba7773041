/**
 * The group commit of sync records (what each node was sent, what it acked, its last report): an
 * operator's act is written at once; the protocol's own records are written together, in one
 * transaction, at most `syncFlushMs` after the first change among them (never one write per ack).
 */
import type { NetworkState, SyncRecord } from '@meshp/core/delta';
import { dirtyKey, type ControllerState } from './state.js';

/** The longest wait between two tries of a flush that failed (the delay doubles from syncFlushMs up to this). */
export const FLUSH_RETRY_MAX_MS = 5000;

/**
 * `durable`: written now (an operator's act); otherwise by the group commit (see `flushSync`). A
 * write now that the store refuses is kept for the group commit, which tries again: the protocol's
 * record is in memory either way, and the crash-safe rule below holds for it.
 */
export function putSync(s: ControllerState, net: NetworkState, id: string, sync: SyncRecord, durable = false): void {
  const key = dirtyKey(net.record.name, id);
  // A store across the network is never waited on: its record goes with the next flush, at once (arm).
  if ((durable || s.syncFlushMs <= 0) && !s.store.transactionAsync) {
    s.dirty.delete(key);
    try {
      s.store.transaction(() => s.store.putSync(net.record.name, id, sync));
      return;
    } catch {
      // The store is down (counted and said by its health): the record waits with the others.
    }
  }
  s.dirty.set(key, { net, id });
  arm(s);
}

/** The next flush, at most syncFlushMs from now, or later after failures (doubling up to FLUSH_RETRY_MAX_MS). */
function arm(s: ControllerState): void {
  if (s.flushTimer) return;
  const base = Math.max(1, s.syncFlushMs);
  const wait = s.flushRetries === 0 ? base : Math.min(FLUSH_RETRY_MAX_MS, base * 2 ** s.flushRetries);
  s.flushTimer = setTimeout(() => {
    s.flushTimer = null;
    // A store across the network: written without the event loop waiting on it.
    if (s.store.transactionAsync) return void flushAsync(s).catch(() => undefined);
    try {
      flushSync(s);
    } catch {
      // Kept dirty and tried again (flushSync): never out of the timer, which would end the process.
    }
  }, wait);
  s.flushTimer.unref?.();
}

/**
 * Writes the sync records changed since the last flush, in one transaction; answers how many.
 *
 * The crash-safe rule of this group commit: a crash loses at most the sends and acks of the last
 * `syncFlushMs`, never a change (a change is committed at once with the records it creates). After
 * a restart an agent at most says its ack again: its hello carries its applied version and hash,
 * which the controller checks against the node's view now (`recoverExpectation`), so an agent that
 * was current resumes with no snapshot, and one that was behind gets its delta or a snapshot.
 *
 * A flush the store refuses keeps its records: each goes back among the dirty ones (unless a newer
 * entry for the node is there already), the next try is armed with a growing delay, and the error
 * is thrown to a caller that asked (the timer's own try swallows it; the store's health says it).
 */
export function flushSync(s: ControllerState): number {
  const items = take(s);
  if (!items) return 0;
  let n = 0;
  try {
    s.store.transaction(() => (n = writeItems(s, items)));
  } catch (e) {
    keep(s, items);
    throw e;
  }
  return flushed(s, n);
}

/** The same through a store across the network (ControllerStore.transactionAsync): the event loop runs on meanwhile. */
export async function flushAsync(s: ControllerState): Promise<number> {
  const items = take(s);
  if (!items) return 0;
  let n = 0;
  try {
    await s.store.transactionAsync!(() => (n = writeItems(s, items)));
  } catch (e) {
    keep(s, items);
    throw e;
  }
  return flushed(s, n);
}

type Items = [string, { net: NetworkState; id: string }][];

function take(s: ControllerState): Items | null {
  if (s.flushTimer) clearTimeout(s.flushTimer);
  s.flushTimer = null;
  if (s.dirty.size === 0) return null;
  const items = [...s.dirty];
  s.dirty.clear();
  return items;
}

function writeItems(s: ControllerState, items: Items): number {
  let n = 0;
  for (const [, { net, id }] of items) {
    const sync = net.sync.get(id);
    // A node removed (or renamed) since: its record went with the change.
    if (s.networks.get(net.record.name) !== net || !sync || !net.members.has(id)) continue;
    s.store.putSync(net.record.name, id, sync);
    n++;
  }
  return n;
}

/** A flush the store refused: its records go back among the dirty ones (unless a newer entry is there), the next try later. */
function keep(s: ControllerState, items: Items): void {
  for (const [key, item] of items) if (!s.dirty.has(key)) s.dirty.set(key, item);
  s.flushRetries++;
  arm(s);
}

function flushed(s: ControllerState, n: number): number {
  s.flushRetries = 0;
  s.syncWrites.flushes++;
  s.syncWrites.records += n;
  return n;
}

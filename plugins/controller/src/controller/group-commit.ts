/**
 * The group commit of sync records (what each node was sent, what it acked, its last report): an
 * operator's act is written at once; the protocol's own records are written together, in one
 * transaction, at most `syncFlushMs` after the first change among them (never one write per ack).
 */
import type { NetworkState, SyncRecord } from '@meshp/core/delta';
import { dirtyKey, type ControllerState } from './state.js';

/** `durable`: written now (an operator's act); otherwise by the group commit (see `flushSync`). */
export function putSync(s: ControllerState, net: NetworkState, id: string, sync: SyncRecord, durable = false): void {
  const key = dirtyKey(net.record.name, id);
  if (durable || s.syncFlushMs <= 0) {
    s.dirty.delete(key);
    s.store.transaction(() => s.store.putSync(net.record.name, id, sync));
    return;
  }
  s.dirty.set(key, { net, id });
  if (!s.flushTimer) {
    s.flushTimer = setTimeout(() => flushSync(s), s.syncFlushMs);
    s.flushTimer.unref?.();
  }
}

/**
 * Writes the sync records changed since the last flush, in one transaction; answers how many.
 *
 * The crash-safe rule of this group commit: a crash loses at most the sends and acks of the last
 * `syncFlushMs`, never a change (a change is committed at once with the records it creates). After
 * a restart an agent at most says its ack again: its hello carries its applied version and hash,
 * which the controller checks against the node's view now (`recoverExpectation`), so an agent that
 * was current resumes with no snapshot, and one that was behind gets its delta or a snapshot.
 */
export function flushSync(s: ControllerState): number {
  if (s.flushTimer) clearTimeout(s.flushTimer);
  s.flushTimer = null;
  if (s.dirty.size === 0) return 0;
  const items = [...s.dirty.values()];
  s.dirty.clear();
  let n = 0;
  s.store.transaction(() => {
    for (const { net, id } of items) {
      const sync = net.sync.get(id);
      // A node removed (or renamed) since: its record went with the change.
      if (s.networks.get(net.record.name) !== net || !sync || !net.members.has(id)) continue;
      s.store.putSync(net.record.name, id, sync);
      n++;
    }
  });
  s.syncWrites.flushes++;
  s.syncWrites.records += n;
  return n;
}

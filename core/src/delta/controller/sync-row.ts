/**
 * A sync record as a store row (issue 31, ADR 0044): what a restart needs of it as columns — the
 * versions applied, sent and checked (basis, target), whether a snapshot is owed, the expected view
 * digests — and the rest as a small document. `recent` (the last deltas sent, for doctor: eight
 * summaries, 1.2 of a record's 2.2 KB) is not written: after a restart doctor shows the deltas sent
 * since. A field added to SyncRecord later goes in the document, never lost. A row written before
 * the columns (applied NULL) is read from its document as it was.
 */
import type { SyncRecord } from './records.js';

/** The columns of a sync row, as both stores write them (the document as JSON text). */
export interface SyncRow {
  applied: number;
  applied_hash: string;
  sent: number;
  basis: number | null;
  target: number | null;
  snapshot_pending: number;
  expectations: string;
  doc: string;
}

export function syncToRow(s: SyncRecord): SyncRow {
  const { applied, appliedHash, sent, basis, target, snapshotPending, expectations, recent: _recent, ...rest } = s;
  return {
    applied,
    applied_hash: appliedHash,
    sent,
    basis: basis ?? null,
    target: target ?? null,
    snapshot_pending: snapshotPending ? 1 : 0,
    expectations: JSON.stringify(expectations),
    doc: JSON.stringify(rest),
  };
}

/** A row as read back: numbers may come as strings (PostgreSQL's BIGINT), the document as text or parsed JSON. */
export type StoredSyncRow = { [K in keyof SyncRow]?: unknown };

const parsed = (v: unknown): Record<string, unknown> =>
  typeof v === 'string' ? (JSON.parse(v) as Record<string, unknown>) : ((v ?? {}) as Record<string, unknown>);

export function syncFromRow(r: StoredSyncRow): SyncRecord {
  const doc = parsed(r.doc);
  // Written before the columns: the whole record is the document.
  if (r.applied === null || r.applied === undefined) return { ...(doc as unknown as SyncRecord), recent: (doc['recent'] as SyncRecord['recent']) ?? [] };
  return {
    ...(doc as Partial<SyncRecord>),
    applied: Number(r.applied),
    appliedHash: String(r.applied_hash ?? ''),
    sent: Number(r.sent),
    ...(r.basis !== null && r.basis !== undefined ? { basis: Number(r.basis) } : {}),
    ...(r.target !== null && r.target !== undefined ? { target: Number(r.target) } : {}),
    snapshotPending: Number(r.snapshot_pending) === 1 || r.snapshot_pending === true,
    expectations: typeof r.expectations === 'string' ? JSON.parse(r.expectations) : ((r.expectations as SyncRecord['expectations']) ?? []),
    recent: [],
  } as SyncRecord;
}

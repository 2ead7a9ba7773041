// The records a store keeps (the controller's store seam names them): they live in core's delta,
// beside the protocol's server half that reads them; re-exported for store implementations.
export type {
  LogEntry,
  MemberRecord,
  ModuleDef,
  NetworkRecord,
  PolicyRule,
  ReportedState,
  SentSummary,
  SharedComponentName,
  SharedComponents,
  SyncRecord,
  Expectation,
} from '@meshp/core/delta';
export * from './store.js';
export { applyRemote } from './remote.js';
export * from './status.js';
export * from './handshake-status.js';
export * from './controller.js';
export * from './tokens.js';
export * from './sqlite-store.js';
export { storeError, isStoreFault, STORE_FAULTS, type StoreFault } from './store-errors.js';
export * from './hosting/index.js';
export * from './converge.js';
export * from './tunnel-key.js';
export * from './catalogue.js';
export { checkDeclarable, checkDefinable } from './declarable.js';
export { historySpan, DEFAULT_WINDOW_MS, DEFAULT_SAMPLE_MS, type HistoryBook, type HistoryRow } from './console/history.js';
export { SqliteHistoryStore } from './console/history-store.js';

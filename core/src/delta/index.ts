// @meshp/core/delta: the delta protocol of docs/adr/0001-incremental-lazily-scoped-deltas.md.
// The wire's constants (the shapes are the contract's, contract/wire.ts) and the shared half: the
// canonical hash, validation, declarations on the wire, hash agreement across revisions.
export * from '../contract/wire.js';
export * from './canonical.js';
export * from './hash.js';
export * from './validate.js';
export * from './declaration.js';
export * from './revision.js';
// The agent's half: its view, the pure step from a view and a delta to the next, and the applier
// that checks each delta against the view it holds.
export * from './agent/view.js';
export * from './agent/next-view.js';
export * from './agent/delta-applier.js';
// The controller's half: a network's records, who a change concerns, each node's view and the
// delta to send it, and what its acks and hellos mean. The controller keeps and serves them.
export * from './controller/records.js';
export * from './controller/sync-row.js';
export * from './controller/policy.js';
export * from './controller/network.js';
export * from './controller/observed.js';
export * from './controller/components.js';
export * from './controller/dns.js';
export * from './controller/routes.js';
export * from './controller/relays.js';
export * from './controller/compute.js';
export * from './controller/scope.js';
export * from './controller/policy-reach.js';
export * from './controller/policy-matrix.js';
export * from './controller/policy-tests.js';
export * from './controller/sync.js';

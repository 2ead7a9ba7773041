export * from '../contract/wire.js';
export * from './canonical.js';
export * from './hash.js';
export * from './agent/view.js';
export * from './validate.js';
export * from './agent/next-view.js';
export * from './agent/delta-applier.js';
export * from './declaration.js';
export * from './revision.js';
// The server half (seed 000): a network's records, who a change concerns, each node's view and
// the delta to send it, and what its acks and hellos mean. The controller keeps and serves them.
export * from './controller/records.js';
export * from './controller/policy.js';
export * from './controller/network.js';
export * from './controller/observed.js';
export * from './controller/components.js';
export * from './controller/compute.js';
export * from './controller/scope.js';
export * from './controller/sync.js';

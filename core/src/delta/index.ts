export * from './wire.js';
export * from './canonical.js';
export * from './hash.js';
export * from './view.js';
export * from './validate.js';
export * from './apply.js';
export * from './applier.js';
export * from './declaration.js';
export * from './revision.js';
// The server half (seed 000): a network's records, who a change concerns, each node's view and
// the delta to send it, and what its acks and hellos mean. The controller keeps and serves them.
export * from './records.js';
export * from './policy.js';
export * from './network.js';
export * from './observed.js';
export * from './components.js';
export * from './compute.js';
export * from './scope.js';
export * from './sync.js';

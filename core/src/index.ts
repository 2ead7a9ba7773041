export * from './model.js';
export * from './errors.js';
export * from './contracts.js';
export * from './host.js';
export * from './reconcile/index.js';
export * from './delta/index.js';
export * from './lifecycle/index.js';
export * from './agent/index.js';

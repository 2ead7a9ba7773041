export * from './wire.js';
export * from './canonical.js';
export * from './hash.js';
export * from './view.js';
export * from './validate.js';
export * from './apply.js';
export * from './applier.js';
export * from './declaration.js';

export * from './transport.js';
export * from './token.js';
export * from './backoff.js';
export * from './agent.js';

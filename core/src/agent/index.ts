export * from '../contract/transport.js';
export * from './token.js';
export * from './backoff.js';
export * from './failover.js';
export * from './agent.js';
export { reconcileLifecycle, LIFECYCLE_KEY, type LifecycleOutcome, type LifecycleStep } from './lifecycle.js';
export * from './view-store.js';
export { leaveMesh, leftRefusal, describeLeave, LEFT_KEY, type LeaveOutcome, type LeaveOptions, type LeftRecord } from './leave.js';
export { untakesAsked, untakePreviews, releasePreviews, UNTAKES_KEY, type UntakesAsked } from './untake.js';

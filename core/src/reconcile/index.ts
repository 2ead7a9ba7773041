export { Reconciler, RETIRED_KEY, type ReconcileOptions, type ReconcileResult } from './reconciler.js';
export { validateDeclaration, checkPath } from '../schema/validate.js';
export { guard, isHeld, vetoReason, type GuardContext } from './guard.js';
export { decide, decideUndeclared, type Declared, type Records, type Seen } from './rule.js';
export { canonicalJson, containerSpecHash, sha256, parseMode, type Observation, type ResourceHandler } from './handlers.js';
export { planOpenings } from './openings.js';
export { verifyOpenings, type Verdict as OpeningVerdict } from './verify.js';
export { untake, untakeRefusal, UNTAKE_KEY, type UntakeOptions, type UntakeResult } from './untake.js';
export { planUntake, originalMode, type UntakePlan, type UntakeStep, type UntakeBlock, type UntakeInput, type UntakeOp } from './untake-rule.js';

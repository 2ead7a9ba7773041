/**
 * The `meshp.spec-hash` label's value. The reconciler computes `mark.specHash` with core's
 * function; this is the same function, so the plugin and the reconciler never disagree.
 */
export { containerSpecHash as specHash, canonicalJson } from '@meshp/core/reconcile';

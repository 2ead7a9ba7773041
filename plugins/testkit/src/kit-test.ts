/**
 * What the kit's suites need of a test framework's test object: tap's `t` fits, and so does the
 * kit's own runner (standalone.ts) for an author who has chosen none.
 */

/** What the kit needs of a test: somewhere to register clean-up. tap's `t` fits. */
export interface Teardown {
  teardown(fn: () => unknown): void;
}

/** The part of a tap test the kit uses; tap's `t` fits. */
export interface KitTest extends Teardown {
  test(name: string, options: object, fn: (t: KitTest) => Promise<void>): unknown;
  ok(value: unknown, ...message: [] | [string]): unknown;
  notOk(value: unknown, ...message: [] | [string]): unknown;
  equal(found: unknown, wanted: unknown, ...message: [] | [string]): unknown;
  same(found: unknown, wanted: unknown, ...message: [] | [string]): unknown;
  fail(...message: [] | [string]): unknown;
  not(found: unknown, notWanted: unknown, ...message: [] | [string]): unknown;
  pass(...message: [] | [string]): unknown;
  /** Whether every assertion so far passed (tap's); the kit reloads the lab after a check that failed. */
  passing?(): boolean;
}

import type t from 'tap';

/** A subtest's `t` (tap's own type for it, taken from `t.test`'s callback). */
export type Subtest = Parameters<Parameters<typeof t.test>[0]>[0];

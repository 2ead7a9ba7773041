/**
 * The hosting's tokens, credentials and reports, behind the controller's store health (issue 24):
 * whatever the AuthBook raises is sorted by condition (store-errors.ts) and makes the store down;
 * a write it takes makes it up again. The callers decide what a refused write means (session.ts:
 * a report not kept leaves the stream open; enrolment and admin calls are refused with the code).
 */
import type { AuthBook } from '@meshp/core';
import { storeError } from '../store-errors.js';
import type { StoreHealth } from '../controller/store-health.js';

/** The AuthBook's methods that write. */
const WRITES = new Set<string | symbol>([
  'putToken',
  'markUsed',
  'takeUse',
  'takeUseAsync',
  'markSeenAsync',
  'revokeToken',
  'confirm',
  'putCredential',
  'revoke',
  'rename',
  'putReport',
  'putReportAsync',
]);

/** `file`: the SQLite file, named in the errors (none for a shared store, which sorts its own). */
export function guardAuth(inner: AuthBook, health: StoreHealth, file?: string): AuthBook {
  return new Proxy(inner, {
    get(target, prop, receiver) {
      const v: unknown = Reflect.get(target, prop, receiver);
      if (typeof v !== 'function') return v;
      // Called on the store itself, never the proxy: its private fields are the store's.
      if (prop === 'close') return (v as () => void).bind(target);
      return (...args: unknown[]): unknown => {
        let out: unknown;
        try {
          out = (v as (...a: unknown[]) => unknown).apply(target, args);
        } catch (e) {
          throw health.failed(storeError(e, file));
        }
        // Asked without waiting (a store across the network): sorted the same when it is answered.
        if (out instanceof Promise)
          return out.then(
            (x: unknown) => {
              if (WRITES.has(prop)) health.ok();
              return x;
            },
            (e: unknown) => {
              throw health.failed(storeError(e, file));
            },
          );
        if (WRITES.has(prop)) health.ok();
        return out;
      };
    },
  });
}

/**
 * The boundary between core and its plugins. Whatever a plugin runs — a tap, or a method of an
 * object it provided (a file store, a firewall driver, a runtime) — fails with an error that names
 * the plugin and the hook or method (Rollup's PLUGIN_ERROR with its plugin code), the cause kept.
 */
import { attribute } from '../errors.js';

/** A tap as tapable keeps it. */
export interface AnyTap {
  name: string;
  type: 'sync' | 'async' | 'promise';
  fn: (...args: unknown[]) => unknown;
}

interface InterceptableHook {
  name?: string;
  intercept(interceptor: { register?: (tap: AnyTap) => AnyTap }): void;
}

function isThenable(v: unknown): v is PromiseLike<unknown> {
  return typeof (v as { then?: unknown } | null)?.then === 'function';
}

/** Runs `fn`, attributing what it throws or rejects with to `plugin` at `where`. */
function guarded<T>(plugin: string, where: string, fn: () => T): T {
  let result: T;
  try {
    result = fn();
  } catch (e) {
    throw attribute(e, plugin, where);
  }
  if (isThenable(result)) {
    return Promise.resolve(result).catch((e: unknown) => {
      throw attribute(e, plugin, where);
    }) as T;
  }
  return result;
}

function wrapTap(tap: AnyTap, hook: string): AnyTap {
  const { fn, name } = tap;
  if (tap.type === 'async') {
    return {
      ...tap,
      fn: (...args: unknown[]) => {
        const callback = args.pop() as (err?: unknown, result?: unknown) => void;
        try {
          fn(...args, (err?: unknown, result?: unknown) => (err ? callback(attribute(err, name, hook)) : callback(undefined, result)));
        } catch (e) {
          callback(attribute(e, name, hook));
        }
      },
    };
  }
  return { ...tap, fn: (...args: unknown[]) => guarded(name, hook, () => fn(...args)) };
}

/** Freezes a host's hooks with every tap registered on them attributed to its own plugin. */
export function attributeTaps<H extends object>(hooks: H): Readonly<H> {
  for (const [key, hook] of Object.entries(hooks) as [string, InterceptableHook][]) {
    hook.intercept({ register: (tap) => wrapTap(tap, hook.name ?? key) });
  }
  return Object.freeze(hooks);
}

/** Calls one (already attributed) tap directly, whatever its type. */
export function invokeTap(tap: AnyTap, args: unknown[]): Promise<unknown> {
  if (tap.type === 'async') {
    return new Promise((resolve, reject) => tap.fn(...args, (err?: unknown, result?: unknown) => (err ? reject(err) : resolve(result))));
  }
  return Promise.resolve().then(() => tap.fn(...args));
}

/**
 * The object a plugin provided, with every method's failure attributed to `plugin` at
 * `part.method`. Methods run on the object itself (private fields keep working); values and
 * identity checks (`instanceof`) pass through.
 */
export function attributed<T>(value: T, plugin: string, part: string): T {
  if (typeof value !== 'object' || value === null) return value;
  const target = value as object;
  // Keyed by the method itself, so a method replaced later (a fault injected in a test) is seen.
  const cache = new WeakMap<object, unknown>();
  return new Proxy(target, {
    get(obj, prop) {
      const v = Reflect.get(obj, prop, obj) as unknown;
      if (typeof v !== 'function' || prop === 'constructor') return v;
      const method = v as (...args: unknown[]) => unknown;
      let wrapped = cache.get(method);
      if (!wrapped) {
        wrapped = (...args: unknown[]) => guarded(plugin, `${part}.${String(prop)}`, () => method.apply(obj, args));
        cache.set(method, wrapped);
      }
      return wrapped;
    },
  }) as T;
}

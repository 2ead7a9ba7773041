/**
 * Runs a suite of the kit without a test framework: `node my-kind.test.mjs` prints TAP (tap and
 * every TAP reader understand it) and exits non-zero when a check fails. For an author who has not
 * chosen a runner yet, and for checking an installed kit with nothing else installed. Subtests run
 * one after another, each after its parent's body; teardowns run last first, also on failure.
 */
import { deepEqual } from 'node:assert';
import type { KitTest } from './kit-test.js';

type Body = (t: KitTest) => unknown;

class StandaloneTest implements KitTest {
  readonly #depth: number;
  readonly #todo: boolean;
  #count = 0;
  #failed = 0;
  #children: { name: string; todo?: string; fn: Body }[] = [];
  #teardowns: (() => unknown)[] = [];

  constructor(depth: number, todo: boolean) {
    this.#depth = depth;
    this.#todo = todo;
  }

  #line(text: string): void {
    process.stdout.write(`${'    '.repeat(this.#depth)}${text}\n`);
  }

  #assert(pass: boolean, message: string, diag?: string): boolean {
    this.#count += 1;
    if (!pass && !this.#todo) this.#failed += 1;
    this.#line(`${pass ? 'ok' : 'not ok'} ${this.#count} - ${message}`);
    if (!pass && diag) for (const l of diag.split('\n')) this.#line(`  # ${l}`);
    return pass;
  }

  ok(value: unknown, message = 'should be truthy'): boolean {
    return this.#assert(!!value, message);
  }
  notOk(value: unknown, message = 'should be falsy'): boolean {
    return this.#assert(!value, message);
  }
  equal(found: unknown, wanted: unknown, message = 'should be equal'): boolean {
    return this.#assert(Object.is(found, wanted), message, `found: ${String(found)}\nwanted: ${String(wanted)}`);
  }
  not(found: unknown, notWanted: unknown, message = 'should not be equal'): boolean {
    return this.#assert(!Object.is(found, notWanted), message, `found: ${String(found)}`);
  }
  same(found: unknown, wanted: unknown, message = 'should be equivalent'): boolean {
    let pass = true;
    try {
      deepEqual(found, wanted); // loose, as tap's `same`
    } catch {
      pass = false;
    }
    return this.#assert(pass, message, `found: ${JSON.stringify(found)}\nwanted: ${JSON.stringify(wanted)}`);
  }
  fail(message = 'failed'): boolean {
    return this.#assert(false, message);
  }
  pass(message = 'passed'): boolean {
    return this.#assert(true, message);
  }
  passing(): boolean {
    return this.#failed === 0;
  }
  teardown(fn: () => unknown): void {
    this.#teardowns.push(fn);
  }
  test(name: string, options: { todo?: string }, fn: Body): void {
    this.#children.push({ name, todo: options.todo, fn });
  }

  /** The body, then each subtest in turn, then the teardowns; answers whether it passed. */
  async run(fn: Body): Promise<boolean> {
    try {
      await fn(this);
      for (const child of this.#children) {
        this.#line(`# Subtest: ${child.name}`);
        const sub = new StandaloneTest(this.#depth + 1, this.#todo || child.todo !== undefined);
        const passed = await sub.run(child.fn);
        this.#count += 1;
        if (!passed && !this.#todo && child.todo === undefined) this.#failed += 1;
        this.#line(`${passed ? 'ok' : 'not ok'} ${this.#count} - ${child.name}${child.todo ? ` # TODO ${child.todo}` : ''}`);
      }
    } catch (e) {
      this.#assert(false, `threw: ${e instanceof Error ? e.message : String(e)}`, e instanceof Error ? e.stack : undefined);
    } finally {
      for (const fn of this.#teardowns.reverse()) {
        try {
          await fn();
        } catch (e) {
          this.#assert(false, `teardown threw: ${String(e)}`);
        }
      }
    }
    this.#line(`1..${this.#count}`);
    return this.#failed === 0;
  }
}

/** Runs `body` (e.g. `(t) => firewallConformance(t, spec)`) as a TAP document; sets a failing exit code on failure. */
export async function standalone(name: string, body: Body): Promise<boolean> {
  process.stdout.write(`TAP version 14\n# ${name}\n`);
  const passed = await new StandaloneTest(0, false).run(body);
  if (!passed) process.exitCode = 1;
  return passed;
}

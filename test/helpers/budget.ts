/**
 * Budgets that scale with the machine, not wall-clock bets.
 *
 * A wait is given in idle-machine time. While the machine is busy (a one-minute load average above
 * its core count), wall time counts for less: at a load of 14 on 2 cores, a second of wall time
 * spends 1/7 of a second of the budget. A wait on a hung process still ends; a wait on a busy
 * machine does not fail for being slow.
 */
import { availableParallelism, loadavg } from 'node:os';

/** How many times slower than idle the machine runs now: 1 when idle, load / cores when busy. */
export function loadFactor(): number {
  return Math.max(1, loadavg()[0]! / availableParallelism());
}

export class Deadline {
  private spent = 0;
  private last = Date.now();

  constructor(private readonly idleMs: number) {}

  /** Idle-machine milliseconds left. */
  left(): number {
    const now = Date.now();
    this.spent += (now - this.last) / loadFactor();
    this.last = now;
    return this.idleMs - this.spent;
  }

  expired(): boolean {
    return this.left() <= 0;
  }
}

/**
 * Waits until `f` gives a truthy value. Polls every `pollMs` at first, then less often (up to a
 * second), so a long wait does not itself load the machine it waits on.
 */
export async function until<T>(
  what: string,
  f: () => Promise<T | null | undefined | false> | T | null | undefined | false,
  idleSeconds = 40,
  pollMs = 200,
): Promise<T> {
  const deadline = new Deadline(idleSeconds * 1000);
  let step = pollMs;
  for (;;) {
    const v = await f();
    if (v) return v;
    if (deadline.expired()) throw new Error(`timed out waiting for ${what} (${idleSeconds} s of idle-machine time, load ${loadavg()[0]!.toFixed(1)})`);
    await new Promise((r) => setTimeout(r, step));
    step = Math.min(1000, Math.round(step * 1.5));
  }
}

/**
 * Gives the running test file `idleSeconds` of idle-machine time. tap's runner keeps each file's
 * timeout; it is told a new one every few seconds over the IPC channel it listens on (the message
 * tap's own `t.setTimeout` sends), stretched by the load. Once the budget is spent the last timeout
 * told stands, so a hung file still ends. A second call replaces the first budget.
 */
export function fileBudget(idleSeconds: number): void {
  const key = process.env['TAP_CHILD_KEY'];
  const child = process.env['TAP_CHILD_ID'];
  if (!process.send || key === undefined) return; // not run by tap's runner: nothing keeps time
  budget.deadline = new Deadline(idleSeconds * 1000);
  const tell = () => {
    const left = budget.deadline!.left();
    if (left > 0 && process.connected) process.send!({ setTimeout: Math.ceil(left * loadFactor()) + 30_000, key, child });
  };
  tell();
  if (!budget.timer) {
    budget.timer = setInterval(tell, 5_000);
    budget.timer.unref();
    // the IPC channel must not keep the file alive once its tests are done
    (process.channel as { unref?(): void } | undefined)?.unref?.();
  }
}

const budget: { deadline?: Deadline; timer?: NodeJS.Timeout } = {};

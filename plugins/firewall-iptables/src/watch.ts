/**
 * `watch(onChange)` for the iptables kinds: a reload of the found firewall (netfilter-persistent,
 * `iptables-restore` of its config) loses our rules; the reconciler is told so it can mend them.
 *
 * - iptables-nft: the rules live in nftables, so `nft -j monitor` (in the runner's namespace)
 *   signals a change of an `ip`/`ip6` `filter` table; the filter tables are then read and compared.
 * - iptables-legacy: there is no event source; the filter tables are read every `intervalMs`.
 *
 * What is compared is a snapshot of the filter tables (IPv4 and IPv6) without counters: the lines
 * that are not ours, and the multiset of our marked lines. A change is news when a line not ours
 * changed, or one of our lines went missing. Our own additions never call back, and the driver
 * holds its watchers while it writes and has them re-read their baseline after (see
 * {@link whileWriting}), so our own removals do not either.
 */
import type { ChildProcess } from 'node:child_process';
import type { Family } from './cidr.js';
import { DERIVED_CHAINS } from './derived.js';
import { legacyTableNames } from './inspect.js';
import { MARK } from './marks.js';
import type { CommandRunner } from './runner.js';
import { FAMILIES, toolName, type Backend } from './tool.js';

export interface WatchOptions {
  /** How often iptables-legacy is read (and iptables-nft, when `nft monitor` cannot run). Default 2000. */
  intervalMs?: number;
  /** Quiet time after an nft event before reading (a reload is a burst of events). Default 200. */
  debounceMs?: number;
}

export interface Snapshot {
  /** The lines that are not ours, in order. */
  theirs: string;
  /** Our lines (marked rules, the derived chains), counted. */
  ours: Map<string, number>;
}

const OUR_CHAINS = Object.values(DERIVED_CHAINS) as string[];

function isOurs(line: string): boolean {
  if (line.includes(`"${MARK}`) || line.includes(` ${MARK}`)) return true;
  const m = /^(?::|-A )(\S+)/.exec(line);
  return m !== null && OUR_CHAINS.includes(m[1]!);
}

/** A snapshot of `iptables-save -t filter` outputs, one per family. */
export function snapshotOf(saves: readonly string[]): Snapshot {
  const theirs: string[] = [];
  const ours = new Map<string, number>();
  saves.forEach((text, i) => {
    theirs.push(`#family ${i}`);
    for (const raw of text.split('\n')) {
      const line = raw.trimEnd().replace(/ \[\d+:\d+\]$/, '');
      if (!line || line.startsWith('#')) continue;
      if (isOurs(line)) ours.set(`${i} ${line}`, (ours.get(`${i} ${line}`) ?? 0) + 1);
      else theirs.push(line);
    }
  });
  return { theirs: theirs.join('\n'), ours };
}

/** True when `next` is news against `prev`: a line not ours changed, or one of ours is gone. */
export function isNews(prev: Snapshot, next: Snapshot): boolean {
  if (prev.theirs !== next.theirs) return true;
  for (const [line, n] of prev.ours) if ((next.ours.get(line) ?? 0) < n) return true;
  return false;
}

const live = new Set<IptablesWatcher>();

/**
 * Runs a driver's own write: while it runs, no watcher of that backend and runner calls back (an
 * IPv4 transaction done and the IPv6 one not yet is a state of ours, not news); afterwards each
 * takes the new state as its baseline.
 */
export async function whileWriting<T>(backend: Backend, runner: CommandRunner, write: () => Promise<T>): Promise<T> {
  const watchers = [...live].filter((w) => w.backend === backend && w.runner === runner);
  for (const w of watchers) w.holds++;
  try {
    return await write();
  } finally {
    await Promise.all(watchers.map((w) => w.rebase()));
    for (const w of watchers) w.holds--;
  }
}

export class IptablesWatcher {
  #baseline: Snapshot | null = null;
  #queue: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #debounce: NodeJS.Timeout | undefined;
  #child: ChildProcess | undefined;
  #closed = false;
  /** Own writes in progress (see {@link whileWriting}): checks call back on nothing meanwhile. */
  holds = 0;
  /** Families whose legacy filter table is known to exist (saving a missing one would create it). */
  readonly #present = new Set<Family>();
  readonly #interval: number;
  readonly #debounceMs: number;
  /** Resolves once the first snapshot is taken: changes before it are not seen. */
  readonly ready: Promise<void>;

  constructor(
    readonly backend: Backend,
    readonly runner: CommandRunner,
    private readonly onChange: () => void,
    options: WatchOptions = {},
  ) {
    this.#interval = options.intervalMs ?? 2000;
    this.#debounceMs = options.debounceMs ?? 200;
    live.add(this);
    this.ready = this.rebase();
    if (backend === 'nft' && runner.spawn) this.#monitor(runner.spawn);
    else this.#poll();
  }

  /** The pid of `nft monitor`, while it runs. */
  get pid(): number | undefined {
    return this.#child && this.#child.exitCode === null && this.#child.signalCode === null ? this.#child.pid : undefined;
  }

  /** Reads the filter tables and takes them as the baseline, calling back on nothing. */
  rebase(): Promise<void> {
    return this.#serial(async () => {
      this.#baseline = await this.#read();
    });
  }

  /** Reads the filter tables and calls back when the change is news. */
  check(): Promise<void> {
    return this.#serial(async () => {
      const next = await this.#read();
      const prev = this.#baseline;
      this.#baseline = next;
      if (prev && !this.#closed && this.holds === 0 && isNews(prev, next)) this.onChange();
    });
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    live.delete(this);
    clearTimeout(this.#timer);
    clearTimeout(this.#debounce);
    const child = this.#child;
    if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
      try {
        process.kill(child.pid, 'SIGTERM');
      } catch {
        // already gone
      }
    }
  }

  #serial(step: () => Promise<void>): Promise<void> {
    // A failed read (a tool gone for a moment) leaves the baseline as it was; the next one tries again.
    const run = this.#queue.then(() => (this.#closed ? undefined : step())).catch(() => undefined);
    this.#queue = run;
    return run;
  }

  async #read(): Promise<Snapshot> {
    const saves: string[] = [];
    for (const family of FAMILIES) saves.push(await this.#save(family));
    return snapshotOf(saves);
  }

  async #save(family: Family): Promise<string> {
    if (this.backend === 'legacy' && !this.#present.has(family)) {
      // Never save a legacy table that does not exist: asking for it loads it.
      if (!(await legacyTableNames(this.runner, family)).includes('filter')) return '';
      this.#present.add(family);
    }
    const r = await this.runner(toolName(this.backend, family, 'save'), ['-t', 'filter']);
    if (r.code !== 0) throw new Error(`${toolName(this.backend, family, 'save')}: ${r.stderr.trim()}`);
    return r.stdout;
  }

  #poll(): void {
    if (this.#closed) return;
    this.#timer = setTimeout(() => {
      void this.check().then(() => this.#poll());
    }, this.#interval);
  }

  #schedule(): void {
    if (this.#closed) return;
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => void this.check(), this.#debounceMs);
  }

  #monitor(spawn: NonNullable<CommandRunner['spawn']>): void {
    let child: ChildProcess;
    try {
      child = spawn('nft', ['-j', 'monitor']);
    } catch {
      this.#poll();
      return;
    }
    this.#child = child;
    let buffer = '';
    child.stdout?.setEncoding('utf8');
    child.stdout?.on('data', (chunk: string) => {
      buffer += chunk;
      const lines = buffer.split('\n');
      buffer = lines.pop() ?? '';
      if (lines.some(touchesFilter)) this.#schedule();
    });
    child.on('error', () => undefined);
    // nft missing or gone: fall back to reading on a timer.
    child.on('exit', () => {
      if (!this.#closed) this.#poll();
    });
  }
}

/** An `nft -j monitor` line about an `ip`/`ip6` table named filter (iptables-nft's), or unreadable. */
export function touchesFilter(line: string): boolean {
  if (!line.trim()) return false;
  let event: unknown;
  try {
    event = JSON.parse(line);
  } catch {
    return true;
  }
  const op = typeof event === 'object' && event !== null ? Object.values(event)[0] : undefined;
  const body = typeof op === 'object' && op !== null ? (Object.values(op)[0] as Record<string, unknown> | undefined) : undefined;
  if (!body) return false;
  const table = 'table' in body ? body.table : body.name;
  return (body.family === 'ip' || body.family === 'ip6') && table === 'filter';
}

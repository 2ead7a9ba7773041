/**
 * Convergence over time for the console's chart: every `sampleMs` the controller's own view of each
 * node's gap (what `node list` and meshp_convergence_gap say) is kept, per network, for `windowMs`
 * (an hour by default; `--console-history`, `--console-sample`): each sample is its time, every node's
 * gap and the fleet's p99 gap. Drawn from memory; written through to the controller's store (a
 * HistoryBook: the state folder's SQLite file, or the shared PostgreSQL database), trimmed there by the
 * same window, and read back at start: a restart keeps the chart (ADR 0043).
 */
import { usage } from '@meshp/core/util';

export interface GapOf {
  network: string;
  node: string;
  gap: number;
}

/** One network's sample as stored: its time (ms since the epoch) and each node's gap. */
export interface HistoryRow {
  network: string;
  at: number;
  gaps: Record<string, number>;
}

/** Where the samples are kept across restarts (history-store.ts; store-postgres history-store.ts). */
export interface HistoryBook {
  /** Every sample at or after `since` (ms), oldest first: read once, at start. */
  loadHistory(since: number): HistoryRow[];
  /** One sample of each network; those before `trimBefore` (ms) deleted in the same write. */
  appendHistory(rows: readonly HistoryRow[], trimBefore: number): void | Promise<void>;
  close(): void;
}

export interface HistoryOptions {
  /** The nodes' gaps as the controller sees them now (hosting/metrics.ts nodes()). */
  gaps: () => GapOf[];
  sampleMs?: number;
  windowMs?: number;
  /** Kept there too, and read back from it at start; memory only when absent. */
  book?: HistoryBook;
  /** Told of a sample that failed on the timer (the sample is missed, the controller goes on). */
  onError?: (e: unknown) => void;
}

export const DEFAULT_SAMPLE_MS = 5_000;
export const DEFAULT_WINDOW_MS = 60 * 60_000;
/** The shortest sample interval: a sample reads every node's gap and writes a row per network. */
export const MIN_SAMPLE_MS = 1_000;
/** Samples a window may hold per network (a day at one every 5 s): what the page is sent each time it changes. */
export const MAX_SAMPLES = 17_280;

/** `--console-history` and `--console-sample` as a window and an interval, refused MESHP_USAGE when they make no sense. */
export function historySpan(windowMs: number, sampleMs: number): { windowMs: number; sampleMs: number } {
  if (!Number.isFinite(sampleMs) || sampleMs < MIN_SAMPLE_MS)
    throw usage(`--console-sample is at least ${MIN_SAMPLE_MS / 1000}s (a sample every second at most)`);
  if (!Number.isFinite(windowMs) || windowMs < sampleMs) throw usage('--console-history is a duration at least as long as --console-sample');
  if (windowMs / sampleMs > MAX_SAMPLES)
    throw usage(
      `--console-history / --console-sample is at most ${MAX_SAMPLES} samples (a window of ${windowMs / 1000}s every ${sampleMs / 1000}s is ${Math.floor(windowMs / sampleMs)})`,
    );
  return { windowMs, sampleMs };
}

interface Sample {
  at: number;
  gaps: Map<string, number>;
}

/** What the page draws: one time axis, the fleet's p99, and each node's gap (null: not a member then). */
export interface HistoryView {
  network: string;
  windowSeconds: number;
  sampleSeconds: number;
  /** Unix seconds. */
  at: number[];
  p99: number[];
  nodes: { name: string; gaps: (number | null)[] }[];
}

/** The nearest-rank 99th percentile (0 for no nodes): of 100 nodes, the second-worst gap. */
export function p99(values: readonly number[]): number {
  if (!values.length) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.ceil(0.99 * sorted.length) - 1]!;
}

export class ConvergenceHistory {
  readonly #byNetwork = new Map<string, Sample[]>();
  readonly #timer: NodeJS.Timeout;
  #closed = false;
  readonly sampleMs: number;
  readonly windowMs: number;

  constructor(readonly o: HistoryOptions) {
    this.sampleMs = o.sampleMs ?? DEFAULT_SAMPLE_MS;
    this.windowMs = o.windowMs ?? DEFAULT_WINDOW_MS;
    // What an earlier run kept, within the window: the chart goes on where it was. A store that cannot
    // give it is told, and the chart starts again: the controller serves all the same.
    try {
      for (const r of o.book?.loadHistory(Date.now() - this.windowMs) ?? []) {
        let list = this.#byNetwork.get(r.network);
        if (!list) this.#byNetwork.set(r.network, (list = []));
        list.push({ at: r.at, gaps: new Map(Object.entries(r.gaps)) });
      }
    } catch (e) {
      this.#byNetwork.clear();
      o.onError?.(e);
    }
    this.sample();
    // A sample that fails on the timer is missed, never an exception that ends the controller.
    this.#timer = setInterval(() => {
      try {
        this.sample();
      } catch (e) {
        o.onError?.(e);
      }
    }, this.sampleMs);
    this.#timer.unref();
  }

  /** One sample of every network, now; what is older than the window goes. */
  sample(now = Date.now()): void {
    const byNet = new Map<string, Map<string, number>>();
    for (const g of this.o.gaps()) {
      let m = byNet.get(g.network);
      if (!m) byNet.set(g.network, (m = new Map()));
      m.set(g.node, g.gap);
    }
    for (const [network, gaps] of byNet) {
      let list = this.#byNetwork.get(network);
      if (!list) this.#byNetwork.set(network, (list = []));
      list.push({ at: now, gaps });
    }
    for (const list of this.#byNetwork.values()) while (list.length && list[0]!.at < now - this.windowMs) list.shift();
    if (!this.o.book || this.#closed) return;
    const rows = [...byNet].map(([network, gaps]) => ({ network, at: now, gaps: Object.fromEntries(gaps) }));
    // A write the store refuses is a sample not kept across a restart; the one in memory is drawn still.
    void Promise.resolve()
      .then(() => (this.#closed ? undefined : this.o.book!.appendHistory(rows, now - this.windowMs)))
      .catch((e: unknown) => this.o.onError?.(e));
  }

  view(network: string): HistoryView {
    const list = this.#byNetwork.get(network) ?? [];
    const names = [...new Set(list.flatMap((s) => [...s.gaps.keys()]))].sort();
    return {
      network,
      windowSeconds: Math.round(this.windowMs / 1000),
      sampleSeconds: this.sampleMs / 1000,
      at: list.map((s) => Math.round(s.at / 1000)),
      p99: list.map((s) => p99([...s.gaps.values()])),
      nodes: names.map((name) => ({ name, gaps: list.map((s) => s.gaps.get(name) ?? null) })),
    };
  }

  close(): void {
    clearInterval(this.#timer);
    this.#closed = true;
    this.o.book?.close();
  }
}

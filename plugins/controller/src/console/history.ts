/**
 * Convergence over time for the console's chart: every `sampleMs` the controller's own view of each
 * node's gap (what `node list` and meshp_convergence_gap say) is kept, per network, for `windowMs`
 * (an hour by default): each sample is its time, every node's gap and the fleet's p99 gap. Kept in
 * the controller's memory while the console is served; a restart starts it again, as /metrics does.
 */

export interface GapOf {
  network: string;
  node: string;
  gap: number;
}

export interface HistoryOptions {
  /** The nodes' gaps as the controller sees them now (hosting/metrics.ts nodes()). */
  gaps: () => GapOf[];
  sampleMs?: number;
  windowMs?: number;
  /** Told of a sample that failed on the timer (the sample is missed, the controller goes on). */
  onError?: (e: unknown) => void;
}

export const DEFAULT_SAMPLE_MS = 5_000;
export const DEFAULT_WINDOW_MS = 60 * 60_000;

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
  readonly sampleMs: number;
  readonly windowMs: number;

  constructor(readonly o: HistoryOptions) {
    this.sampleMs = o.sampleMs ?? DEFAULT_SAMPLE_MS;
    this.windowMs = o.windowMs ?? DEFAULT_WINDOW_MS;
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
  }
}

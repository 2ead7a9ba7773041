/** /metrics read over HTTP and parsed by a Prometheus parser we did not write (parse-prometheus-text-format). */
import { createRequire } from 'node:module';

interface Family {
  name: string;
  type: string;
  metrics: { value?: string; labels?: Record<string, string> }[];
}

const parse = createRequire(import.meta.url)('parse-prometheus-text-format') as (text: string) => Family[];

export interface Scrape {
  families: Family[];
  /** The sample of `name` whose labels include `labels`; undefined when there is none. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Every label set `name` has. */
  labels(name: string): Record<string, string>[];
}

export async function scrape(address: string): Promise<Scrape> {
  const res = await fetch(`http://${address}/metrics`);
  if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
  const families = parse(await res.text());
  const family = (name: string) => families.find((f) => f.name === name);
  return {
    families,
    value(name, labels = {}) {
      const m = family(name)?.metrics.find((s) => Object.entries(labels).every(([k, v]) => s.labels?.[k] === v));
      return m?.value === undefined ? undefined : Number(m.value);
    },
    labels: (name) => (family(name)?.metrics ?? []).map((s) => s.labels ?? {}),
  };
}

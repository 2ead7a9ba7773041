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

/**
 * GET /metrics as text. fetch reuses an idle keep-alive connection, and the server may close it at
 * that moment (node's http server closes idle ones after 5 s): the request then fails with
 * UND_ERR_SOCKET "other side closed" though nothing is wrong. A GET is idempotent, so it is sent once
 * more on a new connection, as Prometheus's own client does.
 */
export async function metricsText(address: string): Promise<string> {
  const get = async () => {
    const res = await fetch(`http://${address}/metrics`);
    if (!res.ok) throw new Error(`/metrics answered ${res.status}`);
    return res.text();
  };
  try {
    return await get();
  } catch (e) {
    if ((e as { cause?: { code?: string } }).cause?.code !== 'UND_ERR_SOCKET') throw e;
    return get();
  }
}

export async function scrape(address: string): Promise<Scrape> {
  const families = parse(await metricsText(address));
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

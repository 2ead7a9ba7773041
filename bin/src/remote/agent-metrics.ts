/**
 * The agent's own `/metrics` (`meshp agent --metrics-listen HOST:PORT`): what this node last did,
 * read on the node itself — useful when the controller cannot be reached, which is when it matters.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { Agent } from '@meshp/core/agent';
import { BUILD_VERSION, serveMetrics } from '@meshp/controller';
import type { DnsResolverStatus } from '@meshp/dns-resolver';

const seconds = (iso: string | undefined): number => (iso ? Date.parse(iso) / 1000 : 0);

export function agentRegistry(agent: Agent, dns?: () => DnsResolverStatus): Registry {
  const r = new Registry();
  collectDefaultMetrics({ register: r });
  new Gauge({ name: 'meshp_build_info', help: 'the running build: always 1', labelNames: ['version', 'node_version'], registers: [r] }).set(
    { version: BUILD_VERSION, node_version: process.version },
    1,
  );
  const g = (name: string, help: string, value: () => number) =>
    new Gauge({
      name,
      help,
      registers: [r],
      collect() {
        this.set(value());
      },
    });
  g('meshp_agent_connected', '1 while the Sync stream to the controller is open', () => (agent.connected ? 1 : 0));
  g('meshp_agent_applied_version', 'the state version this node applied', () => agent.applier.appliedVersion);
  g('meshp_agent_last_reconcile_timestamp_seconds', 'when the last reconcile ended (0: none yet)', () =>
    seconds(agent.lastReport?.reconcile?.at ?? agent.lastReport?.at),
  );
  g('meshp_agent_reconcile_refused', '1 when the last reconcile was refused as a whole', () => (agent.lastReport?.reconcile?.result === 'refused' ? 1 : 0));
  g(
    'meshp_agent_refused_resources',
    'resources the last reconcile refused',
    () => agent.lastReport?.resources.filter((x) => x.state === 'refused').length ?? 0,
  );
  new Gauge({
    name: 'meshp_agent_mode',
    help: 'the mode this node is in: 1 for it, 0 for the other',
    labelNames: ['mode'],
    registers: [r],
    collect() {
      const mode = agent.lastReport?.mode;
      for (const m of ['adopted', 'converged']) this.set({ mode: m }, mode === m ? 1 : 0);
    },
  });
  if (dns) dnsMetrics(r, dns);
  return r;
}

/** The mesh's resolver (issue 25): queries, and answers by outcome, as the resolver counted them since it started. */
function dnsMetrics(r: Registry, dns: () => DnsResolverStatus): void {
  new Counter({
    name: 'meshp_agent_dns_queries_total',
    help: "queries the node's mesh resolver was asked",
    registers: [r],
    collect() {
      this.reset();
      this.inc(dns().queries);
    },
  });
  new Counter({
    name: 'meshp_agent_dns_answers_total',
    help: "the mesh resolver's answers by outcome (answered, nodata, nxdomain: the mesh's names; forwarded, servfail; malformed)",
    labelNames: ['outcome'],
    registers: [r],
    collect() {
      this.reset();
      for (const [outcome, n] of Object.entries(dns().answers)) this.inc({ outcome }, n);
    },
  });
  new Gauge({
    name: 'meshp_agent_dns_names',
    help: "names the node's mesh resolver answers (its peers', its own, the records)",
    registers: [r],
    collect() {
      this.set(dns().names);
    },
  });
}

export async function serveAgentMetrics(address: string, agent: Agent, dns?: () => DnsResolverStatus): Promise<{ address: string; close(): Promise<void> }> {
  const r = agentRegistry(agent, dns);
  return serveMetrics(address, () => r.metrics(), r.contentType);
}

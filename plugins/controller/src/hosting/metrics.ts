/** Prometheus text on `/metrics`: the convergence gap per membership, connected agents, what was sent and refused. */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { MeshpError } from '@meshp/core';
import type { Controller } from '../controller.js';

const esc = (v: string): string => v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

export class Metrics {
  deltasSent = 0;
  snapshotsSent = 0;
  bytesSent = 0;
  enrolments = 0;
  readonly refusals = new Map<string, number>();

  refused(code: string): void {
    this.refusals.set(code, (this.refusals.get(code) ?? 0) + 1);
  }

  render(controller: Controller, connected: number): string {
    const lines: string[] = [];
    const metric = (name: string, type: string, help: string, samples: [string, number][]) => {
      lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
      for (const [labels, v] of samples) lines.push(`${name}${labels} ${v}`);
    };
    const gaps: [string, number][] = [];
    const diverged: [string, number][] = [];
    const applied: [string, number][] = [];
    const versions: [string, number][] = [];
    for (const network of controller.networks()) {
      versions.push([`{network="${esc(network)}"}`, controller.stateVersion(network)]);
      for (const n of controller.listNodes(network)) {
        const l = `{network="${esc(network)}",node="${esc(n.name)}",mode="${n.mode}"}`;
        gaps.push([l, n.gap]);
        applied.push([l, n.appliedVersion]);
        if (n.diverged) diverged.push([`{network="${esc(network)}",node="${esc(n.name)}",code="${esc(n.diverged.split(':')[0]!)}"}`, 1]);
      }
    }
    metric('meshp_convergence_gap', 'gauge', 'state_version - applied_version, per membership', gaps);
    metric('meshp_applied_version', 'gauge', 'the version each membership acked', applied);
    metric('meshp_state_version', 'gauge', 'the state version of each network', versions);
    metric('meshp_connected_agents', 'gauge', 'agents with an authenticated Sync stream', [['', connected]]);
    metric('meshp_deltas_sent_total', 'counter', 'incremental deltas sent', [['', this.deltasSent]]);
    metric('meshp_snapshots_sent_total', 'counter', 'snapshots (from_version 0) sent', [['', this.snapshotsSent]]);
    metric('meshp_delta_bytes_sent_total', 'counter', 'encoded-size estimate of what was sent', [['', this.bytesSent]]);
    metric('meshp_diverged', 'gauge', 'memberships whose snapshots stopped after too many in a row not applied with the hash expected', diverged);
    metric('meshp_enrolments_total', 'counter', 'nodes enrolled', [['', this.enrolments]]);
    metric('meshp_refusals_total', 'counter', 'calls and streams refused, by code', [...this.refusals].map(([c, v]) => [`{code="${esc(c)}"}`, v]));
    return `${lines.join('\n')}\n`;
  }
}

export async function serveMetrics(address: string, render: () => string): Promise<{ address: string; close(): Promise<void> }> {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!m) throw new MeshpError('MESHP_USAGE', `${address} is not HOST:PORT`);
  const server: Server = createServer((req, res) => {
    if (req.method === 'GET' && req.url?.split('?')[0] === '/metrics') {
      res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' }).end(render());
    } else res.writeHead(404).end('not found\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (cause) => reject(new MeshpError('MESHP_UNAVAILABLE', `cannot listen on ${address}`, { cause })));
    server.listen(Number(m[2]), m[1], resolve);
  });
  const port = (server.address() as AddressInfo).port;
  return { address: `${m[1]}:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

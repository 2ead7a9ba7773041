import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Mode } from '@meshp/core';
import { renderReport } from '../host/render.js';
import { Refusal, confirmChange, printJson, refuse, table } from '../output.js';
import { assembleAgentHost } from '../remote/assembly.js';
import { AGENT_DIR, planGenesis, raiseGenesis, type GenesisPlan } from './genesis.js';

/** The catalogue shipped inside the CLI package (copied at `npm pack`), else the checkout's examples. */
const SHIPPED_CATALOGUE = fileURLToPath(new URL('../../catalogue', import.meta.url));
export const DEFAULT_CATALOGUE = existsSync(SHIPPED_CATALOGUE) ? SHIPPED_CATALOGUE : fileURLToPath(new URL('../../../examples/catalogue', import.meta.url));

export interface GenesisArgs {
  state: string;
  adopted: boolean;
  port: string[];
  privateRange: string;
  catalogue: string;
  root: string;
  dockerSocket?: string;
  firewall: string;
  node?: string;
  listen: string;
  privateInterface?: string;
  tunnelInterface?: string;
  endpoint?: string[];
  preview: boolean;
  yes: boolean;
  json: boolean;
}

function parsePorts(specs: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const s of specs) {
    const m = /^([a-z][a-z0-9_-]*)=(\d{1,5})$/i.exec(s);
    const port = m ? Number(m[2]) : NaN;
    if (!m || port < 1 || port > 65535) throw new Refusal(`MESHP_USAGE: --port ${s} is not NAME=PORT`, 2);
    out[m[1]!] = port;
  }
  return out;
}

function renderPlan(p: GenesisPlan): string {
  const ports = Object.entries(p.settings.ports).map(([name, port]) => [name, port]);
  return [
    `genesis of node ${p.node}, ${p.mode === 'adopted' ? 'ADOPTED: the machine keeps its configuration and firewall' : 'converged'}`,
    `found firewall: ${p.firewall.kind}${p.firewall.active ? ' (active)' : ''}; private range ${p.settings.privateRange}`,
    p.privateNetwork.kind === 'tunnel'
      ? `private network: a WireGuard tunnel on ${p.privateNetwork.interface} (UDP ${p.settings.ports['tunnel'] ?? 51820}); the control port is open on the underlay for enrolment (tokens are the gate), the store, registry, bus and broker only over the tunnel`
      : `private network: the interface ${p.privateNetwork.interface}, as it is`,
    `foundation modules: ${p.foundation.join(', ')} on the ports below (the node's settings from now on)`,
    table(['PORT', 'NUMBER'], ports),
  ].join('\n');
}

export async function genesis(args: GenesisArgs): Promise<void> {
  const mode: Mode = args.adopted ? 'adopted' : 'converged';
  const options = { state: args.state, mode, ports: parsePorts(args.port), privateRange: args.privateRange, catalogue: args.catalogue, node: args.node, listen: args.listen, privateInterface: args.privateInterface, tunnelInterface: args.tunnelInterface, endpoints: args.endpoint ?? [] };
  const host = assembleAgentHost({ stateDir: join(args.state, AGENT_DIR), root: args.root, firewall: args.firewall, dockerSocket: args.dockerSocket });
  try {
    const plan = await planGenesis(host, options).catch(refuse);
    if (plan.findings.length > 0) {
      throw new Refusal(`${plan.findings[0]!.code}: ${plan.findings.map((f) => f.message).join('; ')}`);
    }
    if (args.json && args.preview) return printJson({ preview: true, plan });
    if (!args.json) process.stdout.write(`${renderPlan(plan)}\n`);
    if (args.preview) {
      process.stdout.write('(preview: nothing changed)\n');
      return;
    }
    await confirmChange(args.yes, 'Raise the mesh here?', 'pass --yes to raise, --preview to look only');
    const progress = (s: string) => {
      if (!args.json) process.stdout.write(`-> ${s}\n`);
    };
    const done = await raiseGenesis(host, options, plan, progress).catch(refuse);
    if (args.json) {
      printJson({ plan: done.plan, listen: done.listen, fingerprint: done.fingerprint, taken: done.taken, report: done.report, agentState: join(args.state, AGENT_DIR) });
    } else {
      process.stdout.write(`${renderReport(done.report)}\n`);
      process.stdout.write(
        `\nnext: meshp controller serve --state ${args.state} --listen ${done.listen}\n` +
          `      meshp agent --state ${join(args.state, AGENT_DIR)} --root ${args.root} --name ${done.plan.node}` +
          `${done.plan.privateNetwork.kind === 'tunnel' ? '   (it raises the tunnel genesis chose)' : ''}\n`,
      );
    }
  } finally {
    await host.close();
  }
}

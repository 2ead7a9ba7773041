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
  /** `--images FILE`: stand-ins for the catalogue's images (images.ts). */
  images?: string;
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

/**
 * The two commands genesis's machine runs next, with every flag genesis was given that they need:
 * the agent must reach the engine the foundation was raised on (else it sees the foundation's
 * containers as strangers' sockets), under the same root and firewall.
 */
export function nextCommands(
  args: Pick<GenesisArgs, 'state' | 'root' | 'dockerSocket' | 'firewall'>,
  listen: string,
  node: string,
): { controller: string[]; agent: string[] } {
  return {
    controller: ['meshp', 'controller', 'serve', '--state', args.state, '--listen', listen],
    agent: [
      'meshp',
      'agent',
      '--state',
      join(args.state, AGENT_DIR),
      '--root',
      args.root,
      '--name',
      node,
      ...(args.dockerSocket ? ['--docker-socket', args.dockerSocket] : []),
      ...(args.firewall !== 'auto' ? ['--firewall', args.firewall] : []),
    ],
  };
}

/** An argv as a shell line: a word with anything but plain characters is quoted. */
function shellLine(argv: string[]): string {
  return argv.map((w) => (/^[\w@%+=:,./-]+$/.test(w) ? w : `'${w.replace(/'/g, `'\\''`)}'`)).join(' ');
}

export async function genesis(args: GenesisArgs): Promise<void> {
  const mode: Mode = args.adopted ? 'adopted' : 'converged';
  const options = {
    state: args.state,
    mode,
    ports: parsePorts(args.port),
    privateRange: args.privateRange,
    catalogue: args.catalogue,
    node: args.node,
    listen: args.listen,
    privateInterface: args.privateInterface,
    tunnelInterface: args.tunnelInterface,
    endpoints: args.endpoint ?? [],
    images: args.images,
    dockerSocket: args.dockerSocket,
  };
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
    const next = nextCommands(args, done.listen, done.plan.node);
    if (args.json) {
      printJson({
        plan: done.plan,
        listen: done.listen,
        fingerprint: done.fingerprint,
        taken: done.taken,
        report: done.report,
        agentState: join(args.state, AGENT_DIR),
        next,
      });
    } else {
      process.stdout.write(`${renderReport(done.report)}\n`);
      process.stdout.write(
        `\nnext: ${shellLine(next.controller)}\n` +
          `      ${shellLine(next.agent)}${done.plan.privateNetwork.kind === 'tunnel' ? '   (it raises the tunnel genesis chose)' : ''}\n`,
      );
    }
  } finally {
    await host.close();
  }
}

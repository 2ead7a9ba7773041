/**
 * `meshp agent leave --state DIR`: the node leaves its network on purpose, from its agent's state
 * folder alone (no controller is asked): what the mesh added goes, what it found stays — the same
 * function the agent runs when the controller answers that the node was removed (core/src/agent/leave.ts).
 * Says what it will remove first; asks on a terminal, refuses elsewhere without --yes.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import { MeshpError } from '@meshp/core';
import { DnsResolverPlugin } from '@meshp/dns-resolver';
import { ENROLMENT_KEY, LEFT_KEY, describeLeave, leaveMesh, type EnrolResult, type LeaveOutcome, type LeftRecord } from '@meshp/core/agent';
import { logOptions, usage } from '@meshp/core/util';
import { TunnelWireguardPlugin } from '@meshp/tunnel-wireguard';
import { DEFAULT_AGENT_CONFIG, loadPlugins, pluginSpecs } from '../plugins/load.js';
import { confirmChange, printJson, Refusal } from '../output.js';
import { savedTunnel } from '../genesis/private-network.js';
import { agentPlugins, assembleAgentHost } from './assembly.js';
import { logLevel } from './agent.js';

export interface LeaveArgs {
  state: string;
  root: string;
  firewall: string;
  dockerSocket?: string;
  plugin?: string[];
  config?: string;
  tunnelInterface?: string;
  preview: boolean;
  yes: boolean;
  json: boolean;
}

/** The tunnel interface this state folder raised: --tunnel-interface, else tunnel.json, else the one key in wireguard/; null when none. */
export function leavingInterface(state: string, given?: string): string | null {
  if (given) return given;
  const saved = savedTunnel(state);
  if (saved) return saved.interface;
  const dir = join(state, 'wireguard');
  const keys = existsSync(dir)
    ? readdirSync(dir)
        .filter((f) => f.endsWith('.key'))
        .map((f) => f.slice(0, -4))
    : [];
  if (keys.length > 1)
    throw new MeshpError(
      'MESHP_TUNNEL_MISMATCH',
      `${dir} holds the keys of several tunnels (${keys.join(', ')}): name the one to take down with --tunnel-interface`,
    );
  return keys[0] ?? null;
}

const list = (title: string, xs: string[]) => (xs.length ? `${title}\n${xs.map((x) => `  - ${x}`).join('\n')}\n` : '');

export async function agentLeave(a: LeaveArgs): Promise<void> {
  if (!existsSync(a.state)) throw usage(`--state ${a.state} does not exist`);
  const log = pino(logOptions('meshp-agent', logLevel(process.env.MESHP_LOG_LEVEL)), pino.destination({ dest: 2, sync: true }));
  const ifname = leavingInterface(a.state, a.tunnelInterface);
  const tunnel = ifname ? [new TunnelWireguardPlugin({ interface: ifname, stateDir: join(a.state, 'wireguard'), log })] : [];
  const extra = await loadPlugins(pluginSpecs(a, DEFAULT_AGENT_CONFIG));
  const h = assembleAgentHost({ stateDir: a.state, root: a.root, firewall: a.firewall, dockerSocket: a.dockerSocket }, [
    ...agentPlugins(a.firewall),
    ...tunnel,
    // The mesh's resolver is not running here: what it takes away is a converged node's managed /etc/resolv.conf, put back as found.
    ...(ifname ? [new DnsResolverPlugin({ interface: ifname })] : []),
    ...extra,
  ]);
  try {
    const store = await h.state();
    const enrolment = await store.getValue<EnrolResult>(ENROLMENT_KEY);
    if (!enrolment) throw usage(`${a.state} holds no enrolment: this is not an agent's state folder, or the node never joined`);
    const before = await store.getValue<LeftRecord>(LEFT_KEY);
    const o = { why: 'meshp agent leave', network: enrolment.network, node: enrolment.node };
    const preview = await leaveMesh(h, { ...o, preview: true });
    const head = `node ${enrolment.node} leaves network ${enrolment.network}${before ? ` (it left already at ${before.at}: ${before.why}; what remains)` : ''}; the controller is not told (remove it there with meshp node remove ${enrolment.node})`;
    if (a.preview || !a.yes) {
      if (a.json && a.preview) return printJson({ ...o, preview: true, ...preview });
      process.stdout.write(`${head}\n${list('will remove:', preview.removed)}${list('keeps:', preview.kept)}${list('cannot:', preview.failed)}`);
      if (a.preview) return;
    }
    await confirmChange(a.yes, 'leave the network and remove these?', 'give --yes to leave, --preview to only see what would go');
    const done: LeaveOutcome = await leaveMesh(h, { ...o, preview: false });
    if (a.json) printJson({ ...o, preview: false, ...done });
    else
      process.stdout.write(
        `${list('removed:', done.removed)}${list('kept:', done.kept)}left: a meshp agent started on ${a.state} now refuses (MESHP_REMOVED)\n`,
      );
    if (done.failed.length) throw new Refusal(`${done.failed[0]} (${describeLeave(done)})`);
  } finally {
    await h.close();
  }
}

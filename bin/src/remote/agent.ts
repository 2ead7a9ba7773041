/** `meshp agent`: enrol once, then follow the controller until SIGTERM. */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { Agent, MeshpError, decodeToken, type Host } from '@meshp/core';
import { assembleAgentHost } from './assembly.js';
import { ensureNodeKey } from './keys.js';

/** What the agent pins and where it connects, kept after enrolment so the token is needed once. */
export const CONTROLLER_FILE = 'controller.json';

export interface AgentArgs {
  state: string;
  controller?: string;
  token?: string;
  name?: string;
  root: string;
  firewall: string;
  dockerSocket?: string;
  intervalMs: number;
  endpoints?: string[];
  /** HOST:PORT for the agent's own /metrics; none when absent. */
  metricsListen?: string;
}

export interface RunningAgent {
  agent: Agent;
  host: Host;
  stop(): Promise<void>;
}

function controllerOf(args: AgentArgs): { address: string; fingerprint: string } {
  const file = join(args.state, CONTROLLER_FILE);
  const saved = existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { address: string; fingerprint: string }) : null;
  const fingerprint = args.token ? decodeToken(args.token).claims.fingerprint : saved?.fingerprint;
  const address = args.controller ?? saved?.address;
  if (!fingerprint) throw new MeshpError('MESHP_USAGE', 'this node is not enrolled yet: give it --token');
  if (!address) throw new MeshpError('MESHP_USAGE', 'name the controller with --controller HOST:PORT');
  return { address, fingerprint };
}

export async function startAgent(args: AgentArgs, host?: Host): Promise<RunningAgent> {
  const key = ensureNodeKey(args.state);
  const target = controllerOf(args);
  const log = pino({ name: 'meshp-agent', base: { pid: process.pid } }, pino.destination({ dest: 1, sync: true }));
  const h = host ?? assembleAgentHost({ stateDir: args.state, root: args.root, firewall: args.firewall, dockerSocket: args.dockerSocket });
  const link = (await h.transport()).connect(target);
  const agent = new Agent(h, link, {
    node: args.name ?? hostname(),
    token: args.token,
    nodeKey: key.publicKey,
    sign: key.sign,
    intervalMs: args.intervalMs,
    endpoints: args.endpoints,
    log,
  });
  try {
    await agent.start();
  } catch (e) {
    link.close();
    await h.close();
    throw e;
  }
  writeFileSync(join(args.state, CONTROLLER_FILE), `${JSON.stringify(target)}\n`, { mode: 0o600 });
  let metrics: { address: string; close(): Promise<void> } | null = null;
  if (args.metricsListen) {
    const { serveAgentMetrics } = await import('./agent-metrics.js');
    metrics = await serveAgentMetrics(args.metricsListen, agent);
    log.info({ metrics: metrics.address }, 'agent metrics serving');
  }
  return {
    agent,
    host: h,
    stop: async () => {
      await metrics?.close();
      await agent.stop();
      await h.close();
    },
  };
}

/** Runs until SIGTERM or SIGINT, then stops cleanly. */
export async function runAgent(args: AgentArgs): Promise<void> {
  const running = await startAgent(args);
  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      void running.stop().then(resolve);
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

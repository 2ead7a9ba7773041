/** `meshp agent`: enrol once, then follow the controller (one of its replicas) until SIGTERM. */
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { isMeshpError, MeshpError } from '@meshp/core';
import type { Host } from '@meshp/core/host';
import { Agent, FailoverLink, decodeToken, describeLeave, type AgentLeft } from '@meshp/core/agent';
import { logOptions, usage } from '@meshp/core/util';
import { DEFAULT_AGENT_CONFIG, loadPlugins, pluginSpecs } from '../plugins/load.js';
import { agentPlugins, assembleAgentHost } from './assembly.js';
import { recordTunnel, tunnelDecision, tunnelOf, withTunnel } from './tunnel.js';
import { DnsResolverPlugin } from '@meshp/dns-resolver';
import type { TunnelWireguardPlugin } from '@meshp/tunnel-wireguard';
import { refuseIfLeft } from './left.js';
import { withAdvertisedRoutes, withExitNode } from './advertise.js';
import { checkAdvertisedRoutes } from '@meshp/core/schema';
import { ensureNodeKey } from './keys.js';
import { Refusal } from '../output.js';

/** The agent's exit status once its node left the network (removed by the controller, or `meshp agent leave`): not 1, so a unit does not restart it (RestartPreventExitStatus=3). */
export const EXIT_REMOVED = 3;

/** What the agent pins and where it connects, kept after enrolment so the token is needed once. */
export const CONTROLLER_FILE = 'controller.json';

export interface AgentArgs {
  state: string;
  /** HOST:PORT of each controller replica, tried in order; kept in controller.json once started. */
  controller?: string | string[];
  token?: string;
  name?: string;
  root: string;
  firewall: string;
  dockerSocket?: string;
  intervalMs: number;
  endpoints?: string[];
  /** HOST:PORT for the agent's own /metrics; none when absent. */
  metricsListen?: string;
  /** Plugins to load besides the default ones (`--plugin`), and a config file listing more. */
  plugin?: string[];
  config?: string;
  /**
   * `wireguard`: the mesh's private network as a WireGuard tunnel (plugins/tunnel-wireguard); `none`:
   * none. Absent: the tunnel recorded in the state folder, else the network's word (tunnel-record.ts).
   */
  tunnel?: string;
  tunnelInterface?: string;
  /** Move a recorded tunnel to `tunnelInterface`, with its key (otherwise another name is refused). */
  tunnelMove?: boolean;
  tunnelGraceMs?: number;
  /** Prefixes this node offers to route (issue 26); an admin approves them into a route group. */
  advertiseRoutes?: string[];
  /** `--exit-node NAME` (ADR 0039): the exit node this node asks to use, said in its Hello. */
  exitNode?: string;
}

export interface RunningAgent {
  agent: Agent;
  host: Host;
  stop(): Promise<void>;
  /** The node left while the agent ran: it has stopped, and the host is closed. */
  left: Promise<AgentLeft>;
}

/** The token from --token, else --token-file, else MESHP_TOKEN; a token file is read whole and trimmed. */
export function tokenFrom(token: string | undefined, file: string | undefined, env: string | undefined): string | undefined {
  if (token !== undefined && file !== undefined) throw usage('give the token with --token or --token-file, not both');
  if (file !== undefined) {
    let text: string;
    try {
      if (statSync(file).size > 64 * 1024) throw new Error('it is over 64 KiB');
      text = readFileSync(file, 'utf8').trim();
    } catch (e) {
      throw usage(`--token-file ${file} cannot be read: ${(e as Error).message}`);
    }
    if (text === '') throw usage(`--token-file ${file} is empty`);
    return text;
  }
  return token ?? (env?.trim() || undefined);
}

/** The agent's log level: MESHP_LOG_LEVEL (pino's names), info by default. */
export function logLevel(env: string | undefined): string {
  const levels = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
  if (env === undefined || env === '') return 'info';
  if (!levels.includes(env)) throw usage(`MESHP_LOG_LEVEL=${env}: use one of ${levels.join(', ')}`);
  return env;
}

/** Where the agent connects: every replica's HOST:PORT (one store, one certificate) and the one pin. */
export interface ControllerTarget {
  addresses: string[];
  fingerprint: string;
}

/**
 * controller.json as kept: `{ addresses, fingerprint }`, with `address` (the first) beside them for an
 * older meshp started on the folder again; an older meshp wrote `{ address, fingerprint }` only.
 */
export function readControllerFile(file: string): ControllerTarget | null {
  if (!existsSync(file)) return null;
  const saved = JSON.parse(readFileSync(file, 'utf8')) as { address?: unknown; addresses?: unknown; fingerprint?: unknown };
  const addresses = Array.isArray(saved.addresses)
    ? saved.addresses.filter((a): a is string => typeof a === 'string')
    : typeof saved.address === 'string'
      ? [saved.address]
      : [];
  return { addresses, fingerprint: typeof saved.fingerprint === 'string' ? saved.fingerprint : '' };
}

export function writeControllerFile(file: string, target: ControllerTarget): void {
  writeFileSync(file, `${JSON.stringify({ address: target.addresses[0], addresses: target.addresses, fingerprint: target.fingerprint })}\n`, { mode: 0o600 });
}

/** The addresses given (`--controller`, repeatable) else those kept; the pin from the token else the one kept. */
export function controllerOf(args: Pick<AgentArgs, 'state' | 'controller' | 'token'>): ControllerTarget {
  const saved = readControllerFile(join(args.state, CONTROLLER_FILE));
  const fingerprint = args.token ? decodeToken(args.token).claims.fingerprint : saved?.fingerprint;
  const given = typeof args.controller === 'string' ? [args.controller] : (args.controller ?? []);
  const addresses = [...new Set(given.length > 0 ? given : (saved?.addresses ?? []))];
  if (!fingerprint) throw usage('this node is not enrolled yet: give it --token');
  if (addresses.length === 0) throw usage('name the controller with --controller HOST:PORT (repeat it for each replica)');
  for (const a of addresses) if (!/^(\[[^\]]+\]|[^\s:[\]]+):\d{1,5}$/.test(a)) throw usage(`--controller ${a} is not HOST:PORT`);
  return { addresses, fingerprint };
}

/** The agent's host from the shipped plugins, the tunnel (when it runs one) and the plugins the flags or config name. */
async function agentHost(args: AgentArgs, tunnel: Awaited<ReturnType<typeof tunnelOf>>, resolver: DnsResolverPlugin | null): Promise<Host> {
  const extra = await loadPlugins(pluginSpecs(args, DEFAULT_AGENT_CONFIG));
  return assembleAgentHost({ stateDir: args.state, root: args.root, firewall: args.firewall, dockerSocket: args.dockerSocket }, [
    ...agentPlugins(args.firewall),
    ...(tunnel ? [tunnel] : []),
    ...(resolver ? [resolver] : []),
    ...extra,
  ]);
}

/** The agent's own /metrics (`--metrics-listen`). */
async function agentMetrics(
  address: string,
  agent: Agent,
  log: pino.Logger,
  resolver: DnsResolverPlugin | null,
): Promise<{ address: string; close(): Promise<void> }> {
  const { serveAgentMetrics } = await import('./agent-metrics.js');
  const metrics = await serveAgentMetrics(address, agent, resolver ? () => resolver.status() : undefined);
  log.info({ metrics: metrics.address }, 'agent metrics serving');
  return metrics;
}

/**
 * Each reconcile waits for the tunnel and the resolver to follow the view (the first, for them to be
 * attached at all): a socket bound between a converge preview and its flip would be a changed machine
 * (MESHP_PREVIEW_STALE). `following` is called once both are attached, or their attach failed.
 */
function followGate(
  tunnel: { settled(): Promise<void> } | null,
  resolver: { settled(): Promise<void> } | null,
): { beforeReconcile?: () => Promise<void>; following: () => void } {
  let following: () => void = () => undefined;
  const followed = new Promise<void>((resolve) => (following = resolve));
  if (!tunnel && !resolver) return { following };
  const beforeReconcile = async () => {
    await followed;
    await tunnel?.settled();
    await resolver?.settled();
  };
  return { beforeReconcile, following };
}

/** The host given, or the agent's own with the tunnel and — the mesh's names (issue 25) — a resolver on the mesh address wherever the node runs the tunnel. */
async function assemble(
  args: AgentArgs,
  tunnel: TunnelWireguardPlugin | null,
  host: Host | undefined,
  log: pino.Logger,
): Promise<{ h: Host; resolver: DnsResolverPlugin | null }> {
  const resolver = tunnel && !host ? new DnsResolverPlugin({ log, interface: tunnel.status().interface }) : null;
  return { h: host ?? (await agentHost(args, tunnel, resolver)), resolver };
}

/**
 * From the view as restored (an agent restart re-configures the running interface), then every delta;
 * the resolver after the tunnel, whose mesh address it listens on.
 */
async function attachFollowers(
  view: Agent['applier']['view'],
  tunnel: TunnelWireguardPlugin | null,
  resolver: DnsResolverPlugin | null,
  following: () => void,
): Promise<void> {
  try {
    await tunnel?.attach(view);
    await resolver?.attach(view);
  } finally {
    following();
  }
}

/** meshp node rekey: a new key on the device, then recorded (tunnel-record.ts) and reported (ADR 0041). */
function rekeyOf(state: string, tunnel: TunnelWireguardPlugin | null, log: Parameters<typeof recordTunnel>[2]): { rekey?: () => Promise<void> } {
  if (!tunnel) return {};
  return {
    rekey: async () => {
      await tunnel.rekey();
      recordTunnel(state, tunnel, log);
    },
  };
}

/** Checked before anything starts: a prefix with host bits set is refused, naming it; an exit node's name that is none. */
function checkedRouteArgs(args: AgentArgs): string[] {
  if (args.exitNode !== undefined && !/^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$/.test(args.exitNode))
    throw new MeshpError('MESHP_ROUTE_INVALID', `--exit-node ${JSON.stringify(args.exitNode)}: the name of a route group (letters, digits, _ . -)`);
  return checkAdvertisedRoutes(args.advertiseRoutes ?? []);
}

/** The host of HOST:PORT ([IPv6]:PORT). */
const hostOf = (address: string): string => address.replace(/:\d+$/, '').replace(/^\[|\]$/g, '');

export async function startAgent(args: AgentArgs, host?: Host): Promise<RunningAgent> {
  // A node that left is refused first; then the tunnel asked against the one recorded: a mismatch is refused before anything is written.
  await refuseIfLeft(args.state).catch((e: unknown) => {
    throw isMeshpError(e, 'MESHP_REMOVED') ? new Refusal(e.oneLine(), EXIT_REMOVED) : e;
  });
  tunnelDecision(args);
  const advertised = checkedRouteArgs(args);
  const key = ensureNodeKey(args.state);
  const target = controllerOf(args);
  const log = pino(logOptions('meshp-agent', logLevel(process.env.MESHP_LOG_LEVEL)), pino.destination({ dest: 1, sync: true }));
  // The controller's hosts stay out of an exit node's default route (exit-routes.ts): the agent's own connection.
  const tunnel = await tunnelOf(args, log, target.addresses.map(hostOf));
  if (tunnel && host) throw usage('the tunnel plugin is loaded with the agent host it builds; a host given in is already assembled');
  const { h, resolver } = await assemble(args, tunnel, host, log);
  const transport = await h.transport();
  const base = new FailoverLink(
    target.addresses.map((address) => ({ address, link: transport.connect({ address, fingerprint: target.fingerprint }) })),
    log,
  );
  if (tunnel) recordTunnel(args.state, tunnel, log);
  const link = withExitNode(withAdvertisedRoutes(tunnel ? withTunnel(base, tunnel, resolver) : base, advertised), args.exitNode ?? '');
  const { beforeReconcile, following } = followGate(tunnel, resolver);
  const agent = new Agent(h, link, {
    ...(beforeReconcile ? { beforeReconcile } : {}),
    ...rekeyOf(args.state, tunnel, log),
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
    // Enrolled (or resumed): the controller's pin kept before anything else, so an agent stopped
    // while its tunnel and resolver come up starts again without its token.
    writeControllerFile(join(args.state, CONTROLLER_FILE), target);
    await attachFollowers(agent.applier.view, tunnel, resolver, following);
  } catch (e) {
    following();
    link.close();
    await h.close();
    if (isMeshpError(e, 'MESHP_REMOVED')) throw new Refusal(e.oneLine(), EXIT_REMOVED);
    throw e;
  }
  const metrics = args.metricsListen ? await agentMetrics(args.metricsListen, agent, log, resolver) : null;
  // The tunnel stays up across an agent restart: wireguard-go keeps running, found again by its pid.
  const closeRest = async () => {
    await resolver?.close();
    await tunnel?.close();
    await h.close();
  };
  const left = agent.left.then(async (l) => (await metrics?.close(), await closeRest(), l));
  return {
    agent,
    host: h,
    left,
    stop: async () => {
      await metrics?.close();
      await agent.stop();
      await closeRest();
    },
  };
}

/** How long a stop may take before the process leaves anyway: a unit's stop must not hang. */
export const STOP_DEADLINE_MS = 1800;

/**
 * Runs until SIGTERM or SIGINT, then stops cleanly; a stop that takes longer than the deadline (a
 * reconcile waiting on a slow engine) ends the process anyway: every write meshp makes is atomic, so
 * the next start picks up where this one was. A second signal ends it at once.
 */
export async function runAgent(args: AgentArgs): Promise<void> {
  const running = await startAgent(args);
  void running.left.then((l) => {
    // One coded line, then a distinct status (README, "Exit status"): the unit's RestartPreventExitStatus keeps it down.
    process.stderr.write(`${removedLine(l)}\n`);
    setTimeout(() => process.exit(EXIT_REMOVED), 100).unref();
    process.exitCode = EXIT_REMOVED;
  });
  await new Promise<void>((resolve) => {
    void running.left.then(() => resolve());
    const stop = () => {
      process.off('SIGTERM', stop);
      process.off('SIGINT', stop);
      const hard = () => process.exit(1);
      process.once('SIGTERM', hard);
      process.once('SIGINT', hard);
      const deadline = setTimeout(() => {
        process.stderr.write(`meshp agent: the stop took over ${STOP_DEADLINE_MS} ms; leaving now (every write is atomic)\n`);
        process.exit(1);
      }, STOP_DEADLINE_MS);
      deadline.unref();
      void running.stop().finally(() => {
        clearTimeout(deadline);
        // Stopped (its log is flushed: pino writes synchronously). A handle left open somewhere (seen:
        // the process lingered ~15 s after 'stopped') must not hold a stopped agent: it leaves now.
        setTimeout(() => process.exit(0), 100).unref();
        resolve();
      });
    };
    process.on('SIGTERM', stop);
    process.on('SIGINT', stop);
  });
}

/** `MESHP_REMOVED: node N was removed from network NET (…); removed: …; kept: …`. */
export function removedLine(l: AgentLeft): string {
  return `MESHP_REMOVED: node ${l.node} left network ${l.network} (${l.why}); ${describeLeave(l.outcome)}`;
}

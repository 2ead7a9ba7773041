/**
 * `meshp genesis`: the control-node's first act (docs/adr/0002-adopt-before-converge.md). Reads the machine, refuses what must be
 * refused before anything is written, says what it will raise, then: the controller's state (its
 * certificate, the network, the catalogue), the local node enrolled in the chosen mode with the
 * foundation's ports as its settings, and the foundation raised through the reconciler — found
 * resources held, the rest created; on an adopted node, openings from the private range and marked
 * refusals from anywhere else on the forwarded path.
 */
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { MeshpError, isMeshpError, type Declaration, type Mode, type Settings } from '@meshp/core';
import type { Host } from '@meshp/core/host';
import { ENROLMENT_KEY } from '@meshp/core/agent';
import { Reconciler, type ReconcileResult } from '@meshp/core/reconcile';
import { checkGenesis, type GenesisFinding } from '@meshp/core/lifecycle';
import { checkManifest, defaultPorts, renderModule, type CatalogueModule } from '@meshp/core/catalogue';

import { CONTROL_NODE_TAG } from '@meshp/core/delta';
import { AuthStore, CONTROLLER_DB, Controller, DEFAULT_NETWORK, Enrolment, SqliteControllerStore, ensureCertificate } from '@meshp/controller';
import { CONTROLLER_FILE, writeControllerFile } from '../remote/agent.js';
import { ensureNodeKey } from '../remote/keys.js';
import { DEFAULT_DOCKER_SOCKET } from '@meshp/runtime-docker';
import { oneLine, providerMissing, usage } from '@meshp/core/util';
import { bootstrapCatalogue, prepareTunnel, privateNetworkOf, type PrivateNetwork } from './private-network.js';
import { readImages, withImages } from './images.js';

export const AGENT_DIR = 'agent';

export interface GenesisOptions {
  state: string;
  mode: Mode;
  ports: Record<string, number>;
  privateRange: string;
  catalogue: string;
  node?: string;
  /** The address the controller listens on; its port is the node's `control` setting. */
  listen: string;
  /** The interface that already carries the private network, if any; without one, the tunnel is. */
  privateInterface?: string;
  /** The tunnel's interface when genesis raises the tunnel (default meshp0). */
  tunnelInterface?: string;
  /** Where peers reach this node's tunnel (IP:PORT), as `meshp agent --endpoint`. */
  endpoints?: string[];
  /** `--images FILE`: stand-ins for the catalogue's images, by container name (images.ts). */
  images?: string;
  /** The container engine's socket as given (`--docker-socket`), for what genesis says; absent: the default. */
  dockerSocket?: string;
}

export interface GenesisPlan {
  node: string;
  mode: Mode;
  settings: Settings;
  foundation: string[];
  catalogue: string[];
  firewall: { kind: string; active: boolean };
  /** The private network: the interface given, or the tunnel genesis raises. */
  privateNetwork: PrivateNetwork;
  findings: GenesisFinding[];
}

export function readCatalogue(dir: string): CatalogueModule[] {
  if (!existsSync(dir)) throw usage(`no catalogue at ${dir}`);
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => checkManifest(JSON.parse(readFileSync(join(dir, f), 'utf8')), f));
}

/** The catalogue genesis raises: the folder's manifests, with the stand-ins of `--images` when given. */
export function catalogueOf(o: Pick<GenesisOptions, 'catalogue' | 'images'>): CatalogueModule[] {
  const catalogue = readCatalogue(o.catalogue);
  return o.images ? withImages(catalogue, readImages(o.images), o.images) : catalogue;
}

/** Everything genesis needs to know, read before anything is written. */
export async function planGenesis(host: Host, o: GenesisOptions): Promise<GenesisPlan> {
  const privateNetwork = privateNetworkOf(o);
  const catalogue = catalogueOf(o);
  const foundation = catalogue.filter((m) => m.foundation);
  const ports = { ...defaultPorts(foundation), ...o.ports };
  const unknown = Object.keys(o.ports).filter((p) => !(p in defaultPorts(foundation)));
  if (unknown.length) throw usage(`--port names no foundation port: ${unknown.join(', ')} (known: ${Object.keys(defaultPorts(foundation)).join(', ')})`);
  const facts = await host.facts();
  if (!facts) throw providerMissing('the machine facts genesis checks');
  const runtime = await host.runtime();
  const driver = await host.firewall();
  const [listening, addresses, firewall] = await Promise.all([
    facts.listening(),
    facts.addresses(),
    driver ? driver.describe() : Promise.resolve({ kind: 'none', manager: 'none', active: false, tables: [], summary: [] }),
  ]);
  let containers: Awaited<ReturnType<NonNullable<typeof runtime>['list']>> = [];
  if (runtime) {
    try {
      containers = await runtime.list();
    } catch (e) {
      // No engine answering: the foundation cannot be raised; said once, before anything is written,
      // naming the socket tried and how to name another.
      const socket = o.dockerSocket ?? DEFAULT_DOCKER_SOCKET;
      throw new MeshpError(
        'MESHP_RUNTIME_UNAVAILABLE',
        `no container engine answers at ${socket}${o.dockerSocket ? ' (--docker-socket)' : ' (the default)'} (${isMeshpError(e) ? e.message : oneLine(e)}); the foundation runs as containers: start a Docker engine, or give its socket with --docker-socket PATH`,
        { cause: e },
      );
    }
  }
  const published = containers.flatMap((c) => c.ports);
  const findings = checkGenesis(
    { mode: o.mode, ports, privateRange: o.privateRange, privateInterface: o.privateInterface },
    { listening, published, containers, firewall, addresses },
  );
  return {
    node: o.node ?? hostname(),
    mode: o.mode,
    settings: { ports, privateRange: o.privateRange },
    foundation: foundation.map((m) => m.name),
    catalogue: catalogue.map((m) => m.name),
    firewall: { kind: firewall.kind, active: firewall.active },
    privateNetwork,
    findings,
  };
}

function declarationOf(plan: GenesisPlan, catalogue: CatalogueModule[], taken: Set<string>): Declaration {
  return {
    apiVersion: 'meshp/v1',
    node: plan.node,
    mode: plan.mode,
    settings: plan.settings,
    modules: catalogue.filter((m) => plan.foundation.includes(m.name)).map((m) => renderModule(m, plan.settings, taken.has(m.name))),
  };
}

export interface GenesisResult {
  plan: GenesisPlan;
  /** HOST:PORT for `meshp controller serve --listen`. */
  listen: string;
  fingerprint: string;
  taken: string[];
  report: ReconcileResult['report'];
}

/** Writes the controller's state and raises the foundation. The plan must have no findings. */
export async function raiseGenesis(host: Host, o: GenesisOptions, plan: GenesisPlan, progress: (s: string) => void): Promise<GenesisResult> {
  if (plan.findings.length > 0) throw new MeshpError(plan.findings[0]!.code, plan.findings.map((f) => f.message).join('; '));
  const dbFile = join(o.state, CONTROLLER_DB);
  if (existsSync(dbFile)) throw new MeshpError('MESHP_LIFECYCLE', `${o.state} already holds a controller: genesis happens once`);
  const catalogue = bootstrapCatalogue(catalogueOf(o), plan.privateNetwork);
  mkdirSync(o.state, { recursive: true, mode: 0o700 });

  progress('making the controller certificate');
  const listenHost = o.listen.replace(/^\[|\]$/g, '');
  const controlPort = plan.settings.ports['control'];
  if (!controlPort) throw new MeshpError('MESHP_DECLARATION_INVALID', 'the catalogue has no control module: the controller has no port');
  const tls = ensureCertificate(o.state, listenHost && listenHost !== '0.0.0.0' ? [listenHost] : []);
  const controller = new Controller(new SqliteControllerStore(dbFile));
  const auth = new AuthStore(dbFile);
  try {
    progress(`creating network ${DEFAULT_NETWORK} (${o.privateRange}) and its catalogue (${catalogue.map((m) => m.name).join(', ')})`);
    // The network says what carries its private network: with the tunnel, members raise it by default.
    controller.createNetwork(DEFAULT_NETWORK, { privateRange: o.privateRange, privateNetwork: plan.privateNetwork.kind });
    for (const m of catalogue) {
      controller.defineModule(DEFAULT_NETWORK, { name: m.name, files: m.files, containers: m.containers, openings: m.openings } as never);
    }

    progress(`enrolling this machine as node ${plan.node} (${plan.mode})`);
    const agentDir = join(o.state, AGENT_DIR);
    const key = ensureNodeKey(agentDir);
    const tunnelKey = prepareTunnel(agentDir, plan.privateNetwork);
    if (tunnelKey) progress(`the private network is a WireGuard tunnel on ${plan.privateNetwork.interface}: its key made, its agent raises it`);
    const enrolment = new Enrolment(controller, auth, tls.fingerprint);
    // The tag carries the mesh's own rule: every member has this node in its view, whatever the policy.
    const { token } = enrolment.createToken({ network: DEFAULT_NETWORK, mode: plan.mode, ttlSeconds: 60, tags: [CONTROL_NODE_TAG] });
    const enrolled = enrolment.enrol({ token, nodeKey: key.publicKey, node: plan.node, endpoints: o.endpoints ?? [], ...(tunnelKey ? { tunnelKey } : {}) });
    controller.updateMember(DEFAULT_NETWORK, plan.node, { settings: plan.settings });
    for (const name of plan.foundation) controller.assignModule(DEFAULT_NETWORK, plan.node, name);
    const store = await host.state();
    await store.setValue(ENROLMENT_KEY, enrolled);
    const address = `${listenHost && listenHost !== '0.0.0.0' ? listenHost : '127.0.0.1'}:${controlPort}`;
    writeControllerFile(join(agentDir, CONTROLLER_FILE), { addresses: [address], fingerprint: tls.fingerprint });

    progress('raising the foundation: what is found is held, the rest created');
    const reconciler = new Reconciler(host);
    const first = await reconciler.reconcile(declarationOf(plan, catalogue, new Set()));
    const holding = new Set(first.report.resources.filter((r) => r.state === 'held' || r.state === 'changed').map((r) => r.module));
    const taken = plan.foundation.filter((m) => !holding.has(m));
    for (const name of taken) controller.takeModule(DEFAULT_NETWORK, plan.node, name);
    progress(`taking the foundation modules that hold nothing found: ${taken.join(', ') || 'none'}`);
    const done = await reconciler.reconcile(declarationOf(plan, catalogue, new Set(taken)));
    return { plan, listen: `${listenHost || '0.0.0.0'}:${controlPort}`, fingerprint: tls.fingerprint, taken, report: done.report };
  } finally {
    auth.close();
    controller.close();
  }
}

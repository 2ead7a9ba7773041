/**
 * What genesis checks before anything is raised (docs/adr/0002-adopt-before-converge.md): a converged raise on a machine in use
 * is refused, naming what was found; every port the foundation binds must be free, refused with the
 * name of its holder; the private range must not overlap an address or route the machine has.
 * Pure: the facts are read by plugins and handed in.
 */
import { LABEL_MODULE, type ContainerInfo, type FirewallDescription, type Listener, type PublishedPort } from '../contract/providers.js';
import type { Mode } from '../contract/model.js';
import { overlaps } from '../net/cidr.js';

export interface GenesisFacts {
  listening: Listener[];
  published: PublishedPort[];
  containers: ContainerInfo[];
  firewall: FirewallDescription;
  addresses: { interface: string; cidr: string }[];
}

export interface GenesisInput {
  mode: Mode;
  ports: Record<string, number>;
  privateRange: string;
  /** The interface that already carries the private network (a lab's veth): its addresses are the range's own. */
  privateInterface?: string;
}

export interface GenesisFinding {
  code: 'MESHP_MACHINE_IN_USE' | 'MESHP_PORT_HELD' | 'MESHP_RANGE_OVERLAP';
  message: string;
}

function loopback(address: string): boolean {
  return address.startsWith('127.') || address === '::1';
}

function holderOf(l: Listener): string {
  return l.process ? `${l.process}${l.pid ? ` (pid ${l.pid})` : ''}` : 'an unknown process';
}

export function checkGenesis(input: GenesisInput, facts: GenesisFacts): GenesisFinding[] {
  const findings: GenesisFinding[] = [];
  // The mesh's own containers (they carry its module label: a foundation raised before, on this
  // engine) are not a predecessor's: neither "in use" nor a holder of their own module's port.
  const meshModule = new Map(facts.containers.filter((c) => c.labels[LABEL_MODULE]).map((c) => [c.name, c.labels[LABEL_MODULE]!]));
  const theirs = facts.published.filter((p) => !meshModule.has(p.container));
  const meshPorts = new Set(facts.published.filter((p) => meshModule.has(p.container)).map((p) => `${p.protocol}/${p.hostPort}`));

  if (input.mode === 'converged') {
    const inUse: string[] = [];
    if (facts.firewall.active) {
      // The found firewall's own lines when the plugin marks them; Docker's tables are not what closes.
      const found = facts.firewall.summary.filter((l) => l.includes('[found]'));
      const summary = (found.length ? found : facts.firewall.summary).join('; ') || facts.firewall.tables.join(', ');
      inUse.push(`an active ${facts.firewall.kind} firewall (${summary})`);
    }
    const published = new Set(facts.published.map((p) => `${p.protocol}/${p.hostPort}`));
    for (const l of facts.listening) {
      if (loopback(l.address) || published.has(`${l.protocol}/${l.port}`)) continue;
      inUse.push(`${holderOf(l)} listening on ${l.address}:${l.port}/${l.protocol}`);
    }
    const seen = new Set<string>();
    for (const p of theirs) {
      const key = `${p.container}/${p.protocol}/${p.hostPort}`;
      if (seen.has(key)) continue;
      seen.add(key);
      inUse.push(`container ${p.container} publishing ${p.hostPort}/${p.protocol}`);
    }
    if (inUse.length > 0) {
      findings.push({
        code: 'MESHP_MACHINE_IN_USE',
        message: `this machine is in use: ${inUse.join('; ')}. A converged genesis would close it: raise it with --adopted`,
      });
    }
  }

  for (const [name, port] of Object.entries(input.ports)) {
    // The mesh's own container of this very module on its port (and its proxy's socket) holds it for the mesh.
    const own = facts.published.some((p) => p.hostPort === port && meshModule.get(p.container) === name);
    const holders = [
      ...facts.listening.filter((l) => l.port === port && !(own && meshPorts.has(`${l.protocol}/${l.port}`))).map((l) => `${holderOf(l)} on ${l.address}`),
      ...facts.published.filter((p) => p.hostPort === port && meshModule.get(p.container) !== name).map((p) => `container ${p.container}`),
    ];
    if (holders.length > 0) {
      findings.push({
        code: 'MESHP_PORT_HELD',
        message: `port ${name}=${port} is held by ${[...new Set(holders)].join(', ')}: give another with --port ${name}=PORT`,
      });
    }
  }

  for (const a of facts.addresses) {
    if (input.privateInterface && a.interface === input.privateInterface) continue;
    if (a.cidr.startsWith('127.') || a.cidr === '::1/128' || a.cidr.startsWith('fe80:')) continue;
    if (overlaps(a.cidr, input.privateRange)) {
      findings.push({
        code: 'MESHP_RANGE_OVERLAP',
        message: `the private range ${input.privateRange} overlaps ${a.cidr} on ${a.interface}: choose another with --private-range`,
      });
    }
  }
  return findings;
}

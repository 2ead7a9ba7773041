import { fillSettings } from '../../catalogue/manifest.js';
import { declarationToWire } from '../declaration.js';
import { WIRE_MODE, type Components, type Dns, type Filter, type Peer, type RouteGroups, type Tunnel, type WireDeclaration } from '../../contract/wire.js';
import { SCOPE, type PolicyIndex, type Scope } from './policy.js';
import type { MemberRecord, ModuleDef, SharedComponents } from './records.js';
import { endpointsOf } from './observed.js';
import { relaysFor } from './relays.js';
import { peerDigest } from '../hash.js';

/** The peer as `node` sees it. */
export function peerImage(m: MemberRecord, scope: Scope): Peer {
  return {
    id: m.id,
    nodeKey: m.nodeKey,
    addresses: [...m.addresses],
    tags: [...m.tags],
    endpoints: endpointsOf(m),
    inboundOnly: scope === SCOPE.INBOUND_ONLY,
    ...(m.tunnelKey ? { tunnelKey: m.tunnelKey } : {}),
  };
}

/** A peer image shared by every delta that carries it, with its digest (issue 31, ADR 0044). */
export interface SharedPeer {
  /** Frozen: the transport encodes a frozen peer once (its bytes kept by identity) for every agent it goes to. */
  readonly peer: Peer;
  readonly digest: bigint;
}

/** Per member record (replaced on every change, never changed in place): its image at each scope, built and hashed once. */
const shared = new WeakMap<MemberRecord, [SharedPeer | undefined, SharedPeer | undefined]>();

/**
 * `peerImage` and its digest, built once per member record and scope, not once per agent that sees
 * it: in a join every agent's delta carries the same new peer. The image is frozen (deep): a
 * consumer that would change it in place throws rather than changing what other deltas carry.
 */
export function sharedPeer(m: MemberRecord, scope: Scope): SharedPeer {
  let pair = shared.get(m);
  if (!pair) shared.set(m, (pair = [undefined, undefined]));
  const k = scope === SCOPE.INBOUND_ONLY ? 1 : 0;
  let e = pair[k];
  if (!e) {
    const peer = peerImage(m, scope);
    Object.freeze(peer.addresses);
    Object.freeze(peer.tags);
    Object.freeze(peer.endpoints);
    e = pair[k] = { peer: Object.freeze(peer), digest: peerDigest(peer) };
  }
  return e;
}

/**
 * Who may reach the node, from the rules whose destination is one of its tags; and, on a via node, who
 * may reach through it the route groups it serves (`served`: their `route:NAME` destinations, whose
 * rules the tunnel enforces on the forwarded path only: routes.ts).
 */
export function filterFor(node: MemberRecord, policy: PolicyIndex, served: readonly string[] = []): Filter {
  const rules = policy
    .inboundRules([...node.tags, ...served])
    .map((r) => ({ sourceTags: [r.from], destinationTags: [r.to], ports: [...(r.ports ?? [])].sort() }))
    .sort((a, b) => key(a).localeCompare(key(b)));
  return { rules };
}

const key = (r: { sourceTags: string[]; destinationTags: string[]; ports: string[] }): string =>
  `${r.sourceTags.join(',')}>${r.destinationTags.join(',')}:${r.ports.join(',')}`;

/**
 * The node's tunnel: its mesh address with the private range's prefix (`100.96.0.3/16`), so the
 * interface's address also routes the whole range through it, on every node whatever its settings.
 */
export function tunnelFor(node: MemberRecord, privateRange = ''): Tunnel {
  const bare = node.addresses[0] ?? '';
  const prefix = /^[^/]+\/(\d{1,3})$/.exec(privateRange)?.[1];
  const address = bare && prefix && !bare.includes('/') ? `${bare}/${prefix}` : bare;
  return { address, listenPort: node.settings.ports['tunnel'] ?? 51820, mtu: 1280, keepaliveSeconds: 25 };
}

/**
 * A catalogue module for one node: its port placeholders read from the node's settings, so every
 * node's foundation sits on the ports chosen at its genesis. A module naming a setting the node
 * lacks is sent as it is, and the agent refuses it with the placeholder named.
 */
function renderFor(node: MemberRecord, def: ModuleDef): ModuleDef {
  try {
    return fillSettings(def, node.settings);
  } catch {
    return def;
  }
}

/** Every declaration carries the node's mode and, per assigned module, whether it is taken (ADR 0002). */
export function declarationFor(node: MemberRecord, moduleOf: (name: string) => ModuleDef | null): WireDeclaration {
  const taken = new Set(node.taken);
  const d = declarationToWire({
    apiVersion: 'meshp/v1',
    node: node.id,
    mode: node.mode,
    settings: node.settings,
    modules: [...node.assigned].sort().map((name) => ({ ...renderFor(node, moduleOf(name) ?? { name }), name, taken: taken.has(name) })),
  });
  if (d.mode !== WIRE_MODE.ADOPTED && d.mode !== WIRE_MODE.CONVERGED) throw new Error('unreachable: a declaration without a mode');
  // A converged node's declaration names the preview its flip was recorded with; the agent flips only to it.
  // A module untaken through the controller (issue 29) is sent not taken, with the preview the operator saw.
  const untakes = Object.entries(node.untaking ?? {})
    .filter(([m]) => node.assigned.includes(m) && !taken.has(m))
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([module, previewId]) => ({ module, previewId }));
  // A module released with --restore: no longer assigned, its held files that changed while held put back.
  const releases = Object.entries(node.releasing ?? {})
    .filter(([m]) => !node.assigned.includes(m))
    .sort(([a], [b]) => (a < b ? -1 : 1))
    .map(([module, previewId]) => ({ module, previewId }));
  return { ...d, convergePreviewId: node.mode === 'converged' ? (node.convergePreviewId ?? '') : '', untakes, releases };
}

export interface ComponentInputs {
  node: MemberRecord;
  policy: PolicyIndex;
  shared: SharedComponents;
  /** The DNS component in force (dns.ts dnsFor): the shared settings with the domain and the foundation names. */
  dns: Dns;
  /** The route groups this node may use or serves (routes.ts routeGroupsFor). */
  routeGroups: RouteGroups;
  /** The `route:NAME` destinations of the groups it serves (routes.ts servedRouteTags). */
  servedRoutes?: readonly string[];
  moduleOf: (name: string) => ModuleDef | null;
  /** The network's private range: the prefix of the tunnel's address. */
  privateRange?: string;
}

export function componentsFor(i: ComponentInputs): Required<Components> {
  return {
    dns: i.dns,
    filter: filterFor(i.node, i.policy, i.servedRoutes),
    routeGroups: i.routeGroups,
    relays: relaysFor(i.node, i.shared.relays),
    tunnel: tunnelFor(i.node, i.privateRange),
    declaration: declarationFor(i.node, i.moduleOf),
  };
}

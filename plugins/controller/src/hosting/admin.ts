/**
 * The Admin service over the Controller: every call authenticated with the admin credential, every
 * change followed by its fan-out (`changed`: the hub pumps the streams the change concerns).
 * Requests and answers are in the wire's shapes; the methods are grouped by area below.
 */
import {
  MeshpError,
  adminMethod,
  type AdminHandler,
  type AdminActor,
  type AdminCredentialBook,
  type AdminMethods,
  type ModuleDecl,
  type ReportMessage,
  type ResolverReport,
  type WireModuleDecl,
} from '@meshp/core';
import { WIRE_MODE, declarationFromWire, modeFromWire, modeToWire, type SentSummary } from '@meshp/core/delta';
import type { ConvergePreview } from '@meshp/core/lifecycle';
import { checkModuleDefs } from '@meshp/core/schema';
import type { AdminAnswer, AdminApi } from '@meshp/protocol';
import type { Controller } from '../controller.js';
import { convergeNode, previewOf } from '../converge.js';
import { withLiveness, type Liveness, type NodeStatus } from '../status.js';
import { actorOf, adminCredentialMethods, checkRole, whoAmI } from './admin-credentials.js';
import { NODE_NAME, type Enrolment } from './enrolment.js';
import type { Logger } from './log.js';
import type { Metrics } from './metrics.js';
import { readbackMethods } from './readback.js';
import { policyMethods } from './policy-methods.js';
import { expiryMethods } from './expiry-admin.js';
import { auditedChange, auditMethods, type AuditDeps } from './audit.js';
import { dnsMethods } from './dns-admin.js';
import { routeMethods } from './route-admin.js';
import { relayMethods } from './relay-admin.js';
import { untakeFacts, untakeMethods } from './untake-admin.js';
import { tokenRequest } from './token-admin.js';
import { asyncMethods, renameChecks, renameFirst, reportsFirst } from './admin-async.js';
import { notFound, oneLine, usage } from '@meshp/core/util';
import { DEFAULT_NETWORK } from './names.js';

export { DEFAULT_NETWORK } from './names.js';

/** A required string field: proto3 sends '' for one left out. */
const need = (v: string, k: string): string => {
  if (!v) throw usage(`${k} is required`);
  return v;
};

/** Mode 0 on the wire: the agent has not said yet. */
const wireMode = (m: NodeStatus['mode']): number => (m === 'unknown' ? 0 : modeToWire(m));

type WireNode = NonNullable<AdminAnswer<'showNode'>['node']>;

/** A node's status as the admin API sends it (modes as wire numbers, the reported version in both widths). */
export function nodeToWire(n: NodeStatus, last: ReportMessage | null): WireNode {
  // reported_version is 32 bits on the wire (v1-r1): a wider version goes in reported_version_wide only.
  const reported = last?.appliedVersion ?? 0;
  return {
    ...n,
    mode: wireMode(n.mode),
    requestedMode: modeToWire(n.requestedMode),
    transition: { ...n.transition, mode: modeToWire(n.transition.mode) },
    reportedVersion: reported <= 0xffffffff ? reported : 0,
    reportedVersionWide: reported,
    ...(last?.lifecycle ? { lifecycle: { ...last.lifecycle } } : {}),
  };
}

function previewToWire(p: ConvergePreview): NonNullable<AdminAnswer<'previewConverge'>['preview']> {
  return {
    id: p.id,
    node: p.node,
    firewall: { ...p.firewall },
    take: [...p.take],
    steps: [...p.steps],
    changes: p.changes.map((c) => ({ ...c })),
    items: p.items.map((i) => ({
      ...i,
      declaredBy: i.declaredBy ?? '',
      from: [...(i.from ?? [])],
      nowFrom: [...(i.nowFrom ?? [])],
      mentioned: i.mentioned ?? false,
      liveConnections: i.liveConnections ?? 0,
    })),
  };
}

function sentToWire(s: SentSummary): NonNullable<AdminAnswer<'showNode'>['recentDeltas']>[number] {
  return { ...s };
}

export interface AdminDeps {
  controller: Controller;
  enrolment: Enrolment;
  secret: string;
  metrics: Metrics;
  log: Logger;
  /** The node's last report. */
  reports(network: string, node: string): ReportMessage | null;
  /** Called after every change to a network. */
  changed(network: string): void;
  /** The node's stream: open or not, last heard from. */
  live(network: string, node: string): Liveness;
  /** The node left: revoke its credential and key, end its stream. */
  removed?(network: string, node: string, nodeKey: string): void;
  /** The node is about to have a new name: its credential and report follow (called again, reversed, when the controller's store refuses the rename). */
  renaming?(network: string, from: string, to: string): void;
  /** `renaming` without waiting (a store across the network): called before the call's change. */
  renamingAsync?(network: string, from: string, to: string): Promise<void>;
  /** The node has a new name: its stream follows. */
  renamed?(network: string, from: string, to: string): void;
  /** The audit log every change is recorded in (issue 28; audit.ts). Absent: none kept. */
  audit?: Omit<AuditDeps, 'controller' | 'log'>;
  /** The named admin credentials (issue 28; admin-credentials.ts), and the certificate fingerprint their credentials carry. Absent: the bootstrap one alone. */
  admins?: { book: AdminCredentialBook; fingerprint: string };
  /** A node's expiry moved (renewed, expired): the expiry clock looks again (expiry-clock.ts). */
  expiryMoved?(expiresAt?: string): void;
  /** Asks the node's agent, on its open stream here, for a new tunnel key (meshp node rekey); false: none open. */
  rekey?(network: string, node: string, id: string): boolean;
  /** A store across the network: the reports of these nodes (null: the network's) read into memory, without waiting (admin-async.ts). */
  loadReports?(network: string, nodes: string[] | null): Promise<void>;
}

/** The most nodes one ListNodes page holds (a NodeStatus with its held resources is a few KB; the message limit is 4 MB). */
export const MAX_NODES_PAGE = 1_000;

/** Admin methods of one area: those of `K`. */
type Methods<K extends keyof AdminApi> = Pick<AdminMethods<AdminApi>, K>;

/** What every area's methods share: the deps, and a node's status as sent (with its stream's liveness and last report). */
interface Ctx {
  d: AdminDeps;
  controller: Controller;
  live(n: NodeStatus): NodeStatus;
  node(net: string, id: string): WireNode;
  /** A change to one node: made, fanned out, answered with the node's status. */
  change(net: string, act: () => number, r: { node: string }): { node: WireNode };
  /**
   * What undoes a step the call took outside the controller's store, should the store refuse the
   * commit after the call's code returned (a store across the network commits after it): the
   * current call's, run in reverse order.
   */
  undo: (() => void)[];
  /**
   * What the current call does once its change committed (the hosting's tables written after the
   * controller's store: a node's revocation), in order. Its own array per call, set as the call starts.
   */
  after: (() => void)[];
}

function context(d: AdminDeps): Ctx {
  const { controller } = d;
  const live = (n: NodeStatus): NodeStatus => withLiveness(n, d.live(n.network, n.name));
  const node = (net: string, id: string): WireNode => nodeToWire(live(controller.showNode(net, id).node), d.reports(net, id));
  const change = (net: string, act: () => number, r: { node: string }): { node: WireNode } => {
    act();
    d.changed(net);
    return { node: node(net, need(r.node, 'node')) };
  };
  return { d, controller, live, node, change, undo: [], after: [] };
}

/** The resolver's status as the admin answers carry it (no error is '' on the wire). */
const resolverOf = (d: ResolverReport) => ({ ...d, upstreams: [...d.upstreams], lastError: d.lastError ?? '' });

/** What the nodes are: their statuses, one node's, its doctor. */
function statusMethods({ d, controller, live }: Ctx): Methods<'listNodes' | 'showNode' | 'doctor'> {
  return {
    listNodes: (r, net) => {
      const wire = (n: NodeStatus) => nodeToWire(live(n), d.reports(net, n.name));
      // No page asked for: every node, as before (a client from before pages; over the message limit it is refused).
      if (!r.pageSize && !r.pageToken) return { nodes: controller.listNodes(net).map(wire), nextPageToken: '' };
      const { nodes, next } = controller.listNodesPage(net, r.pageToken ?? '', Math.min(r.pageSize || MAX_NODES_PAGE, MAX_NODES_PAGE));
      return { nodes: nodes.map(wire), nextPageToken: next };
    },
    showNode: (r, net) => {
      const s = controller.showNode(net, need(r.node, 'node'));
      const last = d.reports(net, s.node.name);
      return {
        node: nodeToWire(live(s.node), last),
        recentDeltas: s.recentDeltas.map(sentToWire),
        resources: (last?.resources ?? []).map((x) => ({ ...x, reason: x.reason ?? '' })),
        ...(last
          ? { firewall: { kind: last.firewallKind, active: last.firewallActive, tables: last.firewallTables ?? [], configFile: last.firewallConfigFile ?? '' } }
          : {}),
        reportedAt: last?.at ?? '',
        ...(last?.dns ? { dns: resolverOf(last.dns) } : {}),
        routes: controller.nodeRoutes(net, r.node),
        ...untakeFacts(controller, net, s.node.name, last),
      };
    },
    doctor: (r, net) => {
      const s = controller.doctor(net, need(r.node, 'node'));
      const last = d.reports(net, s.node.name);
      return {
        ...s,
        node: nodeToWire(live(s.node), last),
        recentDeltas: s.recentDeltas.map(sentToWire),
        agentApplied: last?.applied ?? [],
        resources: (last?.resources ?? []).map((x) => ({ ...x, reason: x.reason ?? '' })),
        listening: last?.listening ?? [],
        published: last?.published ?? [],
        reportedAt: last?.at ?? '',
        ...(last?.dns ? { dns: resolverOf(last.dns) } : {}),
        routes: controller.nodeRoutes(net, s.node.name),
        ...untakeFacts(controller, net, s.node.name, last),
      };
    },
  };
}

/** A node's mode: the flip previewed and made (docs/adr/0002), or set without a preview. */
function modeMethods({ d, controller, node, change }: Ctx): Methods<'previewConverge' | 'convergeNode' | 'setMode'> {
  return {
    previewConverge: (r, net) => {
      const id = need(r.node, 'node');
      return { preview: previewToWire(previewOf(controller, net, id, d.reports(net, id))), node: node(net, id) };
    },
    convergeNode: (r, net) => {
      const id = need(r.node, 'node');
      const { preview } = convergeNode(controller, net, id, d.reports(net, id), r.previewId || undefined, r.allowClose ?? []);
      d.changed(net);
      return { preview: previewToWire(preview), node: node(net, id) };
    },
    setMode: (r, net) => change(net, () => controller.setMode(net, need(r.node, 'node'), modeFromWire(r.mode)), r),
  };
}

/** Modules: the catalogue added to, a node's modules assigned, unassigned and taken. */
function moduleMethods({ d, controller, change }: Ctx): Methods<'assignModule' | 'unassignModule' | 'takeModule' | 'addCatalogue'> {
  return {
    assignModule: (r, net) => change(net, () => controller.assignModule(net, need(r.node, 'node'), need(r.module, 'module')), r),
    unassignModule: (r, net) => change(net, () => controller.unassignModule(net, need(r.node, 'node'), need(r.module, 'module')), r),
    takeModule: (r, net) => change(net, () => controller.takeModule(net, need(r.node, 'node'), need(r.module, 'module')), r),
    addCatalogue: (r, net) => {
      const wire: WireModuleDecl[] = r.modules;
      if (wire.length === 0) throw usage('the catalogue file defines no module');
      // Checked by the one schema before anything is stored: each module alone and all of them together.
      const modules = checkModuleDefs(modulesFromWire(wire).map(({ taken: _t, ...m }) => stripEmpty(m))).map((m) => ({ ...m, taken: false }));
      // One transaction: a catalogue file is defined whole or not at all.
      const stateVersion = controller.defineModules(
        net,
        modules.map(({ taken: _t, ...def }) => def),
      );
      d.changed(net);
      return { stateVersion, modules: modules.map((m) => m.name) };
    },
  };
}

/** The tokens nodes enrol with (the policy's methods: policy-methods.ts). */
function tokenMethods({ d }: Ctx): Methods<'createToken'> {
  return {
    createToken: (r, net) => d.enrolment.createToken(tokenRequest(r, net)),
  };
}

/** Node and network lifecycle (issue 14): remove revokes, rename keeps the key and the credential. */
function lifecycleMethods(c: Ctx): Methods<'removeNode' | 'renameNode' | 'createNetwork' | 'listNetworks' | 'removeNetwork'> {
  return {
    removeNode: (r, net) => {
      const { d, controller } = c;
      const id = need(r.node, 'node');
      const m = controller.member(net, id);
      if (!m) throw notFound('node', id, net);
      const stateVersion = controller.leave(net, id);
      // Removed: its peers are told whatever the revocation meets (the hosting logs one the store refused).
      // The revocation once the removal committed (with its audit row, in one transaction of the
      // controller's store: the hosting's tables are another connection, which waits on no open one).
      c.after.push(() => d.removed?.(net, id, m.nodeKey));
      d.changed(net);
      return { stateVersion };
    },
    renameNode: (r, net) => {
      const { d, controller, node, undo } = c;
      const names = renameChecks(controller, r, net);
      // Its own name again changes nothing: no version, no delta, the hosting's tables as they are.
      if (!names) return { node: node(net, r.node) };
      const { id, to } = names;
      // The hosting's tables first (the credential follows the name): a rename the controller's store
      // then refuses is undone there, so the agent's credential never names a node the controller does not hold.
      // A store across the network: renamed there before this call, without waiting (adminHandler, renameFirst).
      const sync = d.renamingAsync ? undefined : d.renaming;
      sync?.(net, id, to);
      const back = () => sync?.(net, to, id);
      try {
        controller.renameNode(net, id, to);
      } catch (e) {
        back();
        throw e;
      }
      undo.push(back);
      d.renamed?.(net, id, to);
      d.changed(net);
      return { node: node(net, to) };
    },
    createNetwork: (r) => {
      const { controller } = c;
      const name = need(r.network, 'network');
      if (!NODE_NAME.test(name)) throw usage(`network name ${JSON.stringify(name)} is not valid`);
      const range = r.privateRange;
      if (range && !/^\d{1,3}(\.\d{1,3}){3}\/(\d|[12]\d|3[0-2])$/.test(range)) throw usage(`private range ${range} is not an IPv4 CIDR`);
      controller.createNetwork(name, range ? { privateRange: range } : {});
      return { network: controller.networkInfo(name) };
    },
    listNetworks: () => ({
      networks: c.controller
        .networks()
        .sort()
        .map((n) => c.controller.networkInfo(n)),
    }),
    removeNetwork: (r) => {
      c.controller.removeNetwork(need(r.network, 'network'));
      return {};
    },
  };
}

/** Every admin method but WhoAmI (the handler answers it: only it knows who calls), by area. */
function allMethods(d: AdminDeps, c: Ctx, creds: ReturnType<typeof adminCredentialMethods>): Omit<AdminMethods<AdminApi>, 'whoAmI'> {
  return {
    ...statusMethods(c),
    ...modeMethods(c),
    ...moduleMethods(c),
    ...tokenMethods(c),
    // The policy read, previewed as a reachability diff, tested and set (issue 28): policy-methods.ts.
    ...policyMethods(d.controller, d.changed),
    ...lifecycleMethods(c),
    // The catalogue and the tokens read back (issue 33): readback.ts.
    ...readbackMethods(d.controller, d.enrolment, d.changed),
    // The audit log read back (issue 28): audit.ts.
    listAudit: d.audit ? auditMethods(d.audit.book).listAudit : () => ({ entries: [] }),
    // The network's DNS (issue 25): dns-admin.ts.
    ...dnsMethods(d.controller, d.changed),
    // The network's route groups (issue 26): route-admin.ts.
    ...routeMethods(d.controller, (net, node) => d.reports(net, node), d.changed),
    // The network's relays (issue 27): relay-admin.ts.
    ...relayMethods(d.controller, (net, node) => d.reports(net, node), d.changed),
    // Named admin credentials (issue 28): admin-credentials.ts.
    ...creds.sync,
    // A module's untake, previewed by its agent (issue 29): untake-admin.ts.
    ...untakeMethods(d.controller, (net, node) => d.reports(net, node), c.node, d.changed),
    // Node credentials that expire, and a node's tunnel key rotated (issue 28, ADR 0041): expiry-admin.ts.
    ...expiryMethods({
      controller: d.controller,
      node: c.node,
      changed: d.changed,
      expiryMoved: (at) => d.expiryMoved?.(at),
      rekey: (net, node, id) => d.rekey?.(net, node, id) ?? false,
    }),
  };
}

/** A change the controller makes of itself, as an admin call by `actor` (the ephemeral nodes' removal: ephemeral.ts), recorded and logged as one. */
export type InternalCall = (actor: string) => (method: string, request: object) => Promise<object>;

/** Every admin method, by area, behind the admin credential; each call logged with its network. */
export function adminHandler(d: AdminDeps): AdminHandler & { as: InternalCall } {
  const c = context(d);
  const creds = adminCredentialMethods(d.admins?.book, d.admins?.fingerprint ?? '');
  const methods = allMethods(d, c, creds);
  const audit = d.audit ? { ...d.audit, controller: d.controller, log: d.log } : null;
  // A store across the network: the token and audit calls asked without waiting (admin-async.ts).
  const later = { ...asyncMethods(d.enrolment, d.audit?.book ?? null), ...creds.async } as Record<
    string,
    ((r: object, net: string) => Promise<object>) | undefined
  >;

  const handler: AdminHandler = async (method, request, credential, peer) => {
    // Who calls (the bootstrap credential or a named one in force, read now), and whether its role may (admin-credentials.ts).
    let actor: AdminActor;
    try {
      actor = await actorOf({ secret: d.secret, ...(d.admins ? { book: d.admins.book } : {}) }, credential);
      checkRole(actor, method, request);
    } catch (e) {
      const code = e instanceof MeshpError ? e.code : 'MESHP_AUTH_FAILED';
      d.metrics.refused(code);
      d.log.warn({ method, peer, code, err: oneLine(e) }, 'admin call refused');
      throw e;
    }
    return run(method, request, actor, peer);
  };

  const run = async (method: string, request: object, actor: AdminActor, peer: string): Promise<object> => {
    // WhoAmI is answered here, not by the map: only the handler knows who calls.
    const fn = method === 'whoAmI' ? () => whoAmI(actor) : adminMethod(methods as AdminMethods<AdminApi>, method);
    if (!fn) throw usage(`no admin method ${method}`);
    const network = ('network' in request && typeof request.network === 'string' && request.network) || DEFAULT_NETWORK;
    // The call's code, its undo steps kept for it (one call's code runs at a time: synchronously, or
    // one change after the other; a change run again after another controller's commit starts afresh).
    const undo = c.undo;
    const after: (() => void)[] = [];
    const waitless = later[method];
    const call = () => {
      undo.length = 0;
      after.length = 0;
      c.after = after;
      return waitless ? waitless(request, network) : fn(request, network);
    };
    let back: (() => Promise<void>) | null = null;
    try {
      // A change made is recorded in the audit log (audit.ts); a read is not. A store across the
      // network: one change, committed without the event loop waiting on it (controller.change);
      // the reports the call shows read first, and the token and audit calls, none of which changes
      // the controller's memory, answered by the store without waiting (admin-async.ts).
      await reportsFirst(d.loadReports, method, request, network);
      back = await renameFirst(d.controller, d.renamingAsync?.bind(d), method, request, network);
      const change = <T>(f: () => T): Promise<T> => (d.controller.asyncStore && !waitless ? d.controller.change(f) : Promise.resolve(f()));
      const out = audit ? await auditedChange(audit, method, request as Record<string, unknown>, network, change, call, actor.name) : await change(call);
      for (const f of after.splice(0)) f();
      d.log.info({ method, network, peer, actor: actor.name }, 'admin call');
      return out;
    } catch (e) {
      for (const f of undo.splice(0).reverse()) f();
      if (back)
        await back().catch((err: unknown) =>
          d.log.error({ method, network, err: oneLine(err) }, "rename refused; the hosting's tables could not be renamed back"),
        );
      d.log.warn({ method, network, peer, err: e instanceof Error ? e.message : String(e) }, 'admin call refused');
      throw e;
    }
  };
  return Object.assign(handler, { as: (name: string) => (method: string, request: object) => run(method, request, { name, role: 'admin' }, 'controller') });
}

/** The wire carries empty lists and maps where a file had none: the schema reads them as absent. */
function stripEmpty<T extends object>(m: T): T {
  return JSON.parse(JSON.stringify(m)) as T;
}

function modulesFromWire(modules: WireModuleDecl[]): ModuleDecl[] {
  return declarationFromWire({
    apiVersion: 'meshp/v1',
    node: 'catalogue',
    mode: WIRE_MODE.CONVERGED,
    convergePreviewId: '',
    untakes: [],
    releases: [],
    modules: modules.map((m) => ({ ...m, taken: false })),
  }).modules;
}

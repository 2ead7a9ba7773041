/**
 * The converge preview (docs/adr/0002-adopt-before-converge.md): everything reachable on the machine now — every listening
 * socket and every published container port — and, for each, the module that declares it or
 * that it will close. Its id is a hash of what it saw: the flip applies exactly that preview, and is
 * refused when the machine changed since.
 */
import type { Door, FirewallDescription, Listener, PublishedPort, Reach } from '../contract/providers.js';
import type { Declaration, Opening, Protocol } from '../contract/model.js';
import { toOpening } from '../contract/model.js';
import { canonicalJson, sha256 } from '../reconcile/handlers.js';
import { MeshpError } from '../errors.js';
import type { PlannedChange } from '../contract/transport.js';
import { changeStep, changesForId } from './preview-changes.js';

export type AfterFlip = 'open' | 'closes' | 'local';
/** Where the door is reachable from now, through the live firewall and Docker's NAT. */
export type NowReach = 'open' | 'open-from' | 'closed' | 'local' | 'unknown';

export interface PreviewItem {
  source: 'socket' | 'published';
  protocol: Protocol;
  port: number;
  address: string;
  /** The process holding the socket, or the container publishing the port. */
  holder: string;
  /** The module whose opening keeps it reachable, or whose container publishes it. */
  declaredBy: string | null;
  after: AfterFlip;
  /** Where it stays reachable from after the flip (empty: anywhere). */
  from?: string[];
  now: NowReach;
  /** `open-from`: the source ranges the found rules accept it from. */
  nowFrom?: string[];
  /** Known reach only: whether a rule of the found firewall names the port. */
  mentioned?: boolean;
  /**
   * TCP connections established to the socket now (an ssh session, an agent's control stream). Not
   * part of the preview's id: a session opened or closed is not a changed machine.
   */
  liveConnections?: number;
}

export interface ConvergePreview {
  id: string;
  node: string;
  firewall: { kind: string; active: boolean; tables: string[]; configFile?: string };
  items: PreviewItem[];
  /** Modules not yet taken: the flip takes them. */
  take: string[];
  /** What plugins change beyond the doors (a converged node's resolv.conf): the flip makes each, the id covers them. */
  changes: PlannedChange[];
  steps: string[];
}

export interface PreviewInputs {
  declaration: Declaration;
  listening: Listener[];
  published: PublishedPort[];
  firewall: FirewallDescription;
  /** The firewall's answer for each door (`previewDoors`); a door without one is `unknown`. */
  reach?: Reach[];
  /**
   * The openings plugins add to the converged plan (the tunnel's port, through the `plan` hook), beside
   * the declaration's own: the agent reads them from its plan, the controller from the agent's report.
   */
  pluginOpenings?: Opening[];
  /**
   * The machine's settings the flip changes, said by its plugins (issue 26: a router's forwarding,
   * turned on with its original recorded): one step each. Not part of the id.
   */
  settings?: string[];
  /** The other changes plugins add to the converged plan (preview-changes.ts), as the agent's plan or report holds them. */
  pluginChanges?: PlannedChange[];
}

function isLoopback(address: string): boolean {
  return address.startsWith('127.') || address === '::1';
}

function openingsOf(decl: Declaration): Opening[] {
  return decl.modules.flatMap((m) => (m.openings ?? []).map((o) => toOpening(m.name, o)));
}

/**
 * What the derived filter holds once converged: every opening the declaration's modules declare, then
 * those plugins add that no module declares. One function for the agent and the controller, so the
 * same declaration and the same plugin openings give the same preview, whoever computes it.
 */
export function convergedOpenings(decl: Declaration, pluginOpenings: readonly Opening[] = []): Opening[] {
  const declared = openingsOf(decl);
  const ids = new Set(declared.map((o) => o.id));
  return [...declared, ...pluginOpenings.filter((o) => !ids.has(o.id))];
}

/** Of a plan's openings, those no module of the declaration declares: the plugins' own. */
export function pluginOpeningsOf(decl: Declaration, planned: readonly Opening[]): Opening[] {
  const ids = new Set(openingsOf(decl).map((o) => o.id));
  return planned.filter((o) => !ids.has(o.id)).sort((a, b) => a.id.localeCompare(b.id));
}

function publisherOf(decl: Declaration, port: number, protocol: Protocol): string | null {
  for (const m of decl.modules) {
    for (const c of m.containers ?? []) {
      if ((c.ports ?? []).some((p) => p.host === port && (p.protocol ?? 'tcp') === protocol)) return m.name;
    }
  }
  return null;
}

const doorKey = (path: Door['path'], protocol: Protocol, port: number) => `${path}/${protocol}/${port}`;

/**
 * The doors a preview asks the firewall about: each published port (forwarded, with the
 * container's port) and each listening socket not bound to loopback (incoming), once each.
 */
export function previewDoors(listening: readonly Listener[], published: readonly PublishedPort[]): Door[] {
  const out = new Map<string, Door>();
  for (const p of published) {
    const key = doorKey('forwarded', p.protocol, p.hostPort);
    if (!isLoopback(p.hostIp) && !out.has(key)) out.set(key, { port: p.hostPort, protocol: p.protocol, path: 'forwarded', targetPort: p.containerPort });
  }
  for (const l of listening) {
    const key = doorKey('incoming', l.protocol, l.port);
    if (!isLoopback(l.address) && !out.has(key)) out.set(key, { port: l.port, protocol: l.protocol, path: 'incoming' });
  }
  return [...out.values()];
}

function nowOf(
  reach: ReadonlyMap<string, Reach>,
  path: Door['path'],
  protocol: Protocol,
  port: number,
  local: boolean,
): Pick<PreviewItem, 'now' | 'nowFrom' | 'mentioned'> {
  if (local) return { now: 'local' };
  const r = reach.get(doorKey(path, protocol, port));
  if (!r) return { now: 'unknown' };
  return { now: r.now, ...(r.now === 'open-from' ? { nowFrom: [...(r.from ?? [])] } : {}), mentioned: r.mentioned };
}

type OpeningAt = (port: number, protocol: Protocol, path: Opening['path']) => Opening | undefined;
type ReachByDoor = Map<string, Reach>;

/** Each published port once, with what the flip does to it. */
function publishedItems(input: PreviewInputs, opening: OpeningAt, reach: ReachByDoor, publishedKeys: Set<string>): PreviewItem[] {
  const items: PreviewItem[] = [];
  for (const p of input.published) {
    const key = `${p.protocol}/${p.hostPort}`;
    if (publishedKeys.has(key)) continue;
    publishedKeys.add(key);
    const o = opening(p.hostPort, p.protocol, 'forwarded');
    const local = isLoopback(p.hostIp);
    items.push({
      source: 'published',
      protocol: p.protocol,
      port: p.hostPort,
      address: p.hostIp,
      holder: `container ${p.container}`,
      declaredBy: o?.module ?? publisherOf(input.declaration, p.hostPort, p.protocol),
      after: local ? 'local' : o ? 'open' : 'closes',
      ...(o ? { from: o.from } : {}),
      ...nowOf(reach, 'forwarded', p.protocol, p.hostPort, local),
    });
  }
  return items;
}

/** Each listening socket once per address, with what the flip does to it (a published port's proxy socket is that port). */
function socketItems(input: PreviewInputs, opening: OpeningAt, reach: ReachByDoor, publishedKeys: Set<string>): PreviewItem[] {
  const items: PreviewItem[] = [];
  const socketKeys = new Set<string>();
  for (const l of input.listening) {
    const key = `${l.protocol}/${l.port}`;
    // A published port's proxy socket is the same door as the published port.
    if (publishedKeys.has(key) || socketKeys.has(`${key}/${l.address}`)) continue;
    socketKeys.add(`${key}/${l.address}`);
    const o = opening(l.port, l.protocol, 'incoming');
    const local = isLoopback(l.address);
    items.push({
      source: 'socket',
      protocol: l.protocol,
      port: l.port,
      address: l.address,
      holder: l.process ? `${l.process}${l.pid ? ` (pid ${l.pid})` : ''}` : 'unknown process',
      declaredBy: o?.module ?? null,
      after: local ? 'local' : o ? 'open' : 'closes',
      ...(o ? { from: o.from } : {}),
      ...nowOf(reach, 'incoming', l.protocol, l.port, local),
      ...(l.established ? { liveConnections: l.established } : {}),
    });
  }
  return items;
}

/** The flip's steps, in order, as the preview says them. */
function flipSteps(
  items: PreviewItem[],
  take: string[],
  changes: readonly PlannedChange[],
  openings: Opening[],
  firewall: PreviewInputs['firewall'],
): string[] {
  const closes = closingDoors(items).length;
  const shut = items.filter((i) => i.after === 'closes' && i.now === 'closed').length;
  const live = liveDoorsClosing(items);
  return [
    ...take.map((m) => `take module ${m} (its held resources are replaced by what it declares)`),
    ...changes.map(changeStep),
    `load the mesh's derived filter: drop by default, ${openings.length} opening${openings.length === 1 ? '' : 's'} allowed, ${closes} reachable port${closes === 1 ? '' : 's'} close` +
      `${shut ? `, ${shut} already closed stay${shut === 1 ? 's' : ''} closed` : ''}`,
    firewall.active
      ? `retire the found ${firewall.kind} firewall by disabling it; its configuration${firewall.configFile ? ` (${firewall.configFile})` : ''} stays on disk`
      : 'no found firewall to retire',
    ...live.map(
      (i) =>
        `REFUSED unless allowed: ${doorOf(i)} (${i.holder}) closes with ${i.liveConnections} live connection${i.liveConnections === 1 ? '' : 's'}${isSsh(i) ? ', perhaps your own ssh session' : ''} (they live on; no new one opens): declare it in a module (the catalogue's ssh module), or flip with --allow-close ${doorOf(i)}`,
    ),
  ];
}

export function buildPreview(input: PreviewInputs): ConvergePreview {
  const { declaration: decl, firewall } = input;
  const openings = convergedOpenings(decl, input.pluginOpenings);
  const opening: OpeningAt = (port, protocol, path) => openings.find((o) => o.port === port && o.protocol === protocol && o.path === path);
  const publishedKeys = new Set<string>();
  const reach: ReachByDoor = new Map((input.reach ?? []).map((r) => [doorKey(r.path, r.protocol, r.port), r]));
  const items = [...publishedItems(input, opening, reach, publishedKeys), ...socketItems(input, opening, reach, publishedKeys)];
  items.sort((a, b) => a.port - b.port || a.protocol.localeCompare(b.protocol) || a.source.localeCompare(b.source) || a.address.localeCompare(b.address));
  const take = decl.modules.filter((m) => !m.taken).map((m) => m.name);
  const fw = { kind: firewall.kind, active: firewall.active, tables: firewall.tables, ...(firewall.configFile ? { configFile: firewall.configFile } : {}) };
  const changes = [...(input.pluginChanges ?? [])];
  const steps = [...flipSteps(items, take, changes, openings, firewall), ...(input.settings ?? [])];
  // The id is what the machine offers, not which pid offers it: a restarted or forked server is the same door.
  // Where each door is reachable from now is in the items: a changed firewall is a changed machine.
  return { id: previewId(decl.node, items, take, fw, openings, changes), node: decl.node, firewall: fw, items, take, changes, steps };
}

/** A door as an operator names it: `22/tcp`. */
export const doorOf = (i: Pick<PreviewItem, 'port' | 'protocol'>): string => `${i.port}/${i.protocol}`;

const isSsh = (i: PreviewItem): boolean => i.port === 22 || /^sshd?\b/.test(i.holder);

/** The doors the flip closes that are reachable now: one the found firewall already closes stays closed, and is not counted. */
export function closingDoors(items: readonly PreviewItem[]): PreviewItem[] {
  return items.filter((i) => i.after === 'closes' && i.now !== 'closed');
}

/** The doors the flip closes while connections from other machines are established on them. */
export function liveDoorsClosing(items: readonly PreviewItem[]): PreviewItem[] {
  return items.filter((i) => i.after === 'closes' && (i.liveConnections ?? 0) > 0);
}

/**
 * A flip that closes a door with live connections — an ssh session, perhaps the operator's own: it
 * lives on (the derived filter lets established traffic through), but no new one opens — is refused
 * unless each such door is named in `allowClose` (`22/tcp`). The preview says it first.
 */
export function checkLiveDoors(p: Pick<ConvergePreview, 'node' | 'items'>, allowClose: readonly string[]): void {
  const cut = liveDoorsClosing(p.items).filter((i) => !allowClose.includes(doorOf(i)));
  if (!cut.length) return;
  const doors = cut.map((i) => `${doorOf(i)} (${i.holder}, ${i.liveConnections} live${isSsh(i) ? ', ssh: perhaps your own session' : ''})`).join(', ');
  throw new MeshpError(
    'MESHP_LIVE_SESSION',
    `the flip of ${p.node} would close ${doors}: the sessions open now would live on, but no new one could open; nothing flipped. Declare the port in a module (the catalogue's ssh module for 22/tcp) or allow it with --allow-close ${cut.map(doorOf).join(' --allow-close ')}`,
  );
}

/**
 * The id is what the machine offers, not which pid offers it (a restarted or forked server is the
 * same door) nor who is connected to it now. Where each door is reachable from now is in the items: a
 * changed firewall is a changed machine. The openings are taken in id order, whoever listed them; the
 * plugins' other changes by what they change and what they write, not by how they are worded.
 */
function previewId(
  node: string,
  items: readonly PreviewItem[],
  take: readonly string[],
  fw: ConvergePreview['firewall'],
  openings: readonly Opening[],
  changes: readonly PlannedChange[],
): string {
  const doors = items.map(({ liveConnections: _live, ...i }) => ({ ...i, holder: i.holder.replace(/ \(pid \d+\)$/, '') }));
  const held = openings.map((o) => [o.id, o.from] as const).sort((a, b) => a[0].localeCompare(b[0]));
  // No change beyond the doors hashes as before there were any: an unchanged machine keeps its id across versions.
  const more = changes.length ? { changes: changesForId(changes) } : {};
  return sha256(canonicalJson({ node, items: doors, take, fw, openings: held, ...more })).slice(0, 16);
}

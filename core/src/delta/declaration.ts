import { MeshpError } from '../errors.js';
import type { ContainerSpec, Declaration, Mode, ModuleDecl, OpeningSpec, Protocol, TrafficPath } from '../contract/model.js';
import {
  WIRE_MODE,
  WIRE_PATH,
  WIRE_PROTOCOL,
  type WireContainerSpec,
  type WireDeclaration,
  type WireModuleDecl,
  type WireOpeningSpec,
} from '../contract/wire.js';

export function modeToWire(mode: Mode): number {
  return mode === 'adopted' ? WIRE_MODE.ADOPTED : WIRE_MODE.CONVERGED;
}

export function modeFromWire(mode: number): Mode {
  if (mode === WIRE_MODE.ADOPTED) return 'adopted';
  if (mode === WIRE_MODE.CONVERGED) return 'converged';
  throw new MeshpError('MESHP_DECLARATION_INVALID', `unknown mode ${mode}`);
}

const protocolToWire = (p: Protocol | undefined): number => (p === 'udp' ? WIRE_PROTOCOL.UDP : p === 'tcp' ? WIRE_PROTOCOL.TCP : WIRE_PROTOCOL.UNSPECIFIED);
const protocolFromWire = (p: number): Protocol | undefined => (p === WIRE_PROTOCOL.UDP ? 'udp' : p === WIRE_PROTOCOL.TCP ? 'tcp' : undefined);
const pathToWire = (p: TrafficPath): number => (p === 'forwarded' ? WIRE_PATH.FORWARDED : WIRE_PATH.INCOMING);

function pathFromWire(p: number): TrafficPath {
  if (p === WIRE_PATH.INCOMING) return 'incoming';
  if (p === WIRE_PATH.FORWARDED) return 'forwarded';
  throw new MeshpError('MESHP_DECLARATION_INVALID', `unknown traffic path ${p}`);
}

/** The declaration as it travels in a StateDelta. */
export function declarationToWire(d: Declaration): WireDeclaration {
  return {
    apiVersion: d.apiVersion,
    node: d.node,
    mode: modeToWire(d.mode),
    settings: { ports: { ...d.settings.ports }, privateRange: d.settings.privateRange },
    modules: d.modules.map(moduleToWire),
    convergePreviewId: '',
    untakes: [],
    releases: [],
  };
}

function moduleToWire(m: ModuleDecl): WireModuleDecl {
  return {
    name: m.name,
    taken: m.taken,
    files: (m.files ?? []).map((f) => ({ path: f.path, content: f.content, mode: f.mode, createOnce: f.createOnce })),
    containers: (m.containers ?? []).map(containerToWire),
    openings: (m.openings ?? []).map(openingToWire),
  };
}

function containerToWire(c: ContainerSpec): WireContainerSpec {
  return {
    name: c.name,
    image: c.image,
    command: [...(c.command ?? [])],
    env: { ...(c.env ?? {}) },
    ports: (c.ports ?? []).map((p) => ({ container: p.container, host: p.host, protocol: protocolToWire(p.protocol) })),
    mounts: (c.mounts ?? []).map((m) => ({ source: m.source, target: m.target, readOnly: m.readOnly === true })),
    restart: c.restart,
  };
}

function openingToWire(o: OpeningSpec): WireOpeningSpec {
  return { id: o.id, port: o.port, protocol: protocolToWire(o.protocol), from: [...(o.from ?? [])], path: pathToWire(o.path) };
}

/** The declaration the host reconciles, from the one that arrived. */
export function declarationFromWire(w: WireDeclaration): Declaration {
  if (w.apiVersion !== 'meshp/v1') throw new MeshpError('MESHP_DECLARATION_INVALID', `unknown apiVersion ${w.apiVersion}`);
  return {
    apiVersion: 'meshp/v1',
    node: w.node,
    mode: modeFromWire(w.mode),
    settings: { ports: { ...(w.settings?.ports ?? {}) }, ...(w.settings?.privateRange ? { privateRange: w.settings.privateRange } : {}) },
    modules: w.modules.map((m) => ({
      name: m.name,
      taken: m.taken,
      files: m.files.map((f) => ({ path: f.path, content: f.content, ...(f.mode ? { mode: f.mode } : {}), ...(f.createOnce ? { createOnce: true } : {}) })),
      containers: m.containers.map((c) => ({
        name: c.name,
        image: c.image,
        ...(c.command.length ? { command: [...c.command] } : {}),
        ...(Object.keys(c.env).length ? { env: { ...c.env } } : {}),
        ...(c.ports.length
          ? {
              ports: c.ports.map((p) => ({
                container: p.container,
                host: p.host,
                ...(protocolFromWire(p.protocol) ? { protocol: protocolFromWire(p.protocol) } : {}),
              })),
            }
          : {}),
        ...(c.mounts.length ? { mounts: c.mounts.map((mt) => ({ source: mt.source, target: mt.target, ...(mt.readOnly ? { readOnly: true } : {}) })) } : {}),
        ...(c.restart ? { restart: c.restart as ContainerSpec['restart'] } : {}),
      })),
      openings: m.openings.map((o) => ({
        ...(o.id ? { id: o.id } : {}),
        port: o.port,
        ...(protocolFromWire(o.protocol) ? { protocol: protocolFromWire(o.protocol) } : {}),
        ...(o.from.length ? { from: [...o.from] } : {}),
        path: pathFromWire(o.path),
      })),
    })),
  };
}

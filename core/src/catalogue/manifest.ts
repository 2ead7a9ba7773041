/**
 * A catalogue module: what a module declares, with the foundation's ports as placeholders
 * ("{{ports.store}}") and the catalogue's numbers only as defaults. A node's settings fill them,
 * so every reader of a port — container, opening, file — reads the node's setting.
 */
import { MeshpError } from '../errors.js';
import type { ModuleDecl, Settings } from '../contract/model.js';
import { checkInput } from '../schema/check.js';
import { catalogueManifestSchema } from '../schema/declaration.js';

export interface CatalogueModule {
  apiVersion: 'meshp/v1';
  kind: 'Module';
  name: string;
  /** Foundation modules are raised by genesis. */
  foundation?: boolean;
  defaults?: { ports?: Record<string, number> };
  files?: unknown[];
  containers?: unknown[];
  openings?: unknown[];
}

const PLACEHOLDER = /\{\{\s*(ports\.[a-zA-Z0-9_-]+|privateRange)\s*\}\}/g;

function lookup(name: string, settings: Settings): string | number {
  if (name === 'privateRange') {
    if (!settings.privateRange) throw new MeshpError('MESHP_DECLARATION_INVALID', 'a module names {{privateRange}} and the node has none');
    return settings.privateRange;
  }
  const port = settings.ports[name.slice('ports.'.length)];
  if (port === undefined) throw new MeshpError('MESHP_DECLARATION_INVALID', `a module names {{${name}}} and the node has no such port`);
  return port;
}

function fill(value: unknown, settings: Settings): unknown {
  if (typeof value === 'string') {
    const whole = /^\{\{\s*(ports\.[a-zA-Z0-9_-]+|privateRange)\s*\}\}$/.exec(value);
    if (whole) return lookup(whole[1]!, settings);
    return value.replace(PLACEHOLDER, (_, name: string) => String(lookup(name, settings)));
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, settings));
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, fill(v, settings)]));
  }
  return value;
}

/** The settings a value names (`ports.NAME`, `privateRange`), each once, sorted. */
export function settingsNamed(value: unknown): string[] {
  const out = new Set<string>();
  const walk = (v: unknown): void => {
    if (typeof v === 'string') for (const m of v.matchAll(PLACEHOLDER)) out.add(m[1]!);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(walk);
  };
  walk(value);
  return [...out].sort();
}

/** The settings a value names that `settings` does not hold: what `fillSettings` would refuse. */
export function missingSettings(value: unknown, settings: Settings): string[] {
  return settingsNamed(value).filter((name) => (name === 'privateRange' ? !settings.privateRange : settings.ports[name.slice('ports.'.length)] === undefined));
}

/** Fills every `{{ports.NAME}}` and `{{privateRange}}` in a value from a node's settings. */
export function fillSettings<T>(value: T, settings: Settings): T {
  return fill(value, settings) as T;
}

/** The ports a set of catalogue modules binds, with the catalogue's defaults. */
export function defaultPorts(modules: CatalogueModule[]): Record<string, number> {
  return Object.assign({}, ...modules.map((m) => m.defaults?.ports ?? {}));
}

/** A catalogue manifest checked by the one schema (core/src/schema): coded, naming the field. */
export function checkManifest(doc: unknown, where: string): CatalogueModule {
  checkInput(catalogueManifestSchema, doc, where);
  return doc as CatalogueModule;
}

/** A catalogue module made concrete for a node: placeholders filled from the node's settings. */
export function renderModule(m: CatalogueModule, settings: Settings, taken: boolean): ModuleDecl {
  return {
    name: m.name,
    taken,
    files: fill(m.files ?? [], settings) as ModuleDecl['files'],
    containers: fill(m.containers ?? [], settings) as ModuleDecl['containers'],
    openings: fill(m.openings ?? [], settings) as ModuleDecl['openings'],
  };
}

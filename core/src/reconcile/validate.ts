import { MeshpError } from '../errors.js';
import { MODES, openingId, resourceKey, type Declaration, type ModuleDecl } from '../model.js';

const NAME = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$/;
const CIDR = /^[0-9a-fA-F:.]+\/\d{1,3}$/;

function fail(message: string): never {
  throw new MeshpError('MESHP_DECLARATION_INVALID', message);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function port(v: unknown, where: string): number {
  if (!Number.isInteger(v) || (v as number) < 1 || (v as number) > 65535) fail(`${where}: port must be 1..65535, got ${JSON.stringify(v)}`);
  return v as number;
}

/** An absolute path with no `.` or `..` segment: a path that could climb out of the root is refused before anything is read. */
export function checkPath(path: unknown, where: string): string {
  if (typeof path !== 'string' || !path.startsWith('/')) fail(`${where}: path must be absolute, got ${JSON.stringify(path)}`);
  if (path.includes('\0')) fail(`${where}: path contains a NUL byte`);
  const segments = path.split('/').slice(1);
  if (segments.some((s) => s === '..' || s === '.')) {
    throw new MeshpError('MESHP_PATH_ESCAPES_ROOT', `${where}: path ${path} has a "." or ".." segment`);
  }
  if (path.length > 1 && segments.some((s) => s === '')) fail(`${where}: path ${path} has an empty segment`);
  return path;
}

function checkModule(m: unknown, i: number, keys: Map<string, string>): void {
  if (!isObject(m)) fail(`modules[${i}] must be an object`);
  const name = m.name;
  if (typeof name !== 'string' || !NAME.test(name)) fail(`modules[${i}].name must be a simple name, got ${JSON.stringify(name)}`);
  const where = `module ${name}`;
  if (typeof m.taken !== 'boolean') fail(`${where}: taken must be true or false`);
  const claim = (key: string) => {
    const other = keys.get(key);
    if (other !== undefined) fail(`${key} is declared by both module ${other} and module ${name}`);
    keys.set(key, name);
  };
  for (const field of ['files', 'containers', 'openings'] as const) {
    if (m[field] !== undefined && !Array.isArray(m[field])) fail(`${where}: ${field} must be a list`);
  }
  const mod = m as unknown as ModuleDecl;
  for (const [j, f] of (mod.files ?? []).entries()) {
    const fw = `${where} files[${j}]`;
    if (!isObject(f)) fail(`${fw} must be an object`);
    checkPath(f.path, fw);
    if (typeof f.content !== 'string') fail(`${fw}: content must be a string`);
    if (f.mode !== undefined && (typeof f.mode !== 'string' || !/^0?[0-7]{3,4}$/.test(f.mode))) fail(`${fw}: mode must be octal like "0644"`);
    if (f.createOnce !== undefined && typeof f.createOnce !== 'boolean') fail(`${fw}: createOnce must be true or false`);
    claim(resourceKey('file', f.path));
  }
  for (const [j, c] of (mod.containers ?? []).entries()) {
    const cw = `${where} containers[${j}]`;
    if (!isObject(c)) fail(`${cw} must be an object`);
    if (typeof c.name !== 'string' || !NAME.test(c.name)) fail(`${cw}: name must be a simple name`);
    if (typeof c.image !== 'string' || c.image === '') fail(`${cw}: image must be given`);
    if (c.command !== undefined && (!Array.isArray(c.command) || c.command.some((a) => typeof a !== 'string'))) fail(`${cw}: command must be a list of strings`);
    for (const [k, p] of (c.ports ?? []).entries()) {
      port(p.container, `${cw} ports[${k}].container`);
      port(p.host, `${cw} ports[${k}].host`);
      if (p.protocol !== undefined && p.protocol !== 'tcp' && p.protocol !== 'udp') fail(`${cw} ports[${k}]: protocol must be tcp or udp`);
    }
    claim(resourceKey('container', c.name));
  }
  for (const [j, o] of (mod.openings ?? []).entries()) {
    const ow = `${where} openings[${j}]`;
    if (!isObject(o)) fail(`${ow} must be an object`);
    port(o.port, ow);
    if (o.path !== 'incoming' && o.path !== 'forwarded') fail(`${ow}: path must be incoming or forwarded`);
    if (o.protocol !== undefined && o.protocol !== 'tcp' && o.protocol !== 'udp') fail(`${ow}: protocol must be tcp or udp`);
    if (o.from !== undefined && (!Array.isArray(o.from) || o.from.some((r) => typeof r !== 'string' || !CIDR.test(r)))) fail(`${ow}: from must be a list of CIDR ranges`);
    claim(resourceKey('opening', openingId(name, o)));
  }
}

/** Checks a declaration's shape before anything on the machine is read. Throws MESHP_DECLARATION_INVALID. */
export function validateDeclaration(d: unknown): Declaration {
  if (!isObject(d)) fail('a declaration must be a JSON object');
  if (d.apiVersion !== 'meshp/v1') fail(`apiVersion must be "meshp/v1", got ${JSON.stringify(d.apiVersion)}`);
  if (typeof d.node !== 'string' || !NAME.test(d.node)) fail(`node must be a simple name, got ${JSON.stringify(d.node)}`);
  if (!MODES.includes(d.mode as never)) fail(`mode must be "adopted" or "converged", got ${JSON.stringify(d.mode)}`);
  const settings = d.settings ?? { ports: {} };
  if (!isObject(settings)) fail('settings must be an object');
  const ports = settings.ports ?? {};
  if (!isObject(ports)) fail('settings.ports must be an object of name → port');
  for (const [name, p] of Object.entries(ports)) port(p, `settings.ports.${name}`);
  if (settings.privateRange !== undefined && (typeof settings.privateRange !== 'string' || !CIDR.test(settings.privateRange))) {
    fail('settings.privateRange must be a CIDR range');
  }
  if (!Array.isArray(d.modules)) fail('modules must be a list');
  const keys = new Map<string, string>();
  const names = new Set<string>();
  d.modules.forEach((m, i) => {
    checkModule(m, i, keys);
    const name = (m as ModuleDecl).name;
    if (names.has(name)) fail(`module ${name} is listed twice`);
    names.add(name);
  });
  return { ...(d as unknown as Declaration), settings: { ...(settings as object), ports } as Declaration['settings'] };
}

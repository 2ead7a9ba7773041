/**
 * Loading plugins by name: `--plugin MODULE[=OPTIONS_JSON]` (repeatable) and a `plugins` list in a
 * config file. A MODULE is an npm package name (resolved from the working folder, or from the config
 * file's folder) or a path (`./my-kind`, `/opt/meshp/my-kind.js`). The module's default export is the
 * plugin: an object, a class taking the options, or a function returning one. Every failure names the
 * module; the contract version is checked by the host when the plugin is used.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, isAbsolute, join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { MeshpError, type Plugin } from '@meshp/core';
import { inputTooLarge, usage } from '@meshp/core/util';
import { trustedFile } from '@meshp/state-files';

export interface PluginSpec {
  module: string;
  options?: unknown;
  /** The folder names and relative paths are resolved from. */
  base: string;
}

/** The config file the agent reads when none is named and it exists. */
export const DEFAULT_AGENT_CONFIG = '/etc/meshp/agent.json';

/** Bounds on what a config file or an option may carry. */
const MAX_CONFIG_BYTES = 256 * 1024;
const MAX_PLUGINS = 64;

/** `MODULE` or `MODULE=OPTIONS_JSON`; the first `=` followed by `{` or `[` starts the options. */
export function parsePluginArg(arg: string, base = process.cwd()): PluginSpec {
  const at = arg.search(/=[[{]/);
  if (at < 0) {
    if (arg.trim() === '') throw usage('--plugin needs a module name or path');
    return { module: arg, base };
  }
  const module = arg.slice(0, at);
  const text = arg.slice(at + 1);
  if (module.trim() === '') throw usage(`--plugin ${arg}: a module name or path comes before "="`);
  try {
    return { module, options: JSON.parse(text) as unknown, base };
  } catch (e) {
    throw usage(`--plugin ${module}: its options are not JSON (${(e as Error).message})`);
  }
}

/** The `plugins` list of a config file: strings, or `{ "module": "…", "options": … }`. */
export function readPluginConfig(file: string): PluginSpec[] {
  let text: string;
  try {
    trustedFile(file, 'config'); // it names code to run: only its owner (root or this user) may write it
    if (statSync(file).size > MAX_CONFIG_BYTES) throw inputTooLarge(`config ${file} is over ${MAX_CONFIG_BYTES} bytes`);
    text = readFileSync(file, 'utf8');
  } catch (e) {
    if (e instanceof MeshpError) throw e;
    throw usage(`config ${file} cannot be read: ${(e as Error).message}`);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (e) {
    throw usage(`config ${file} is not JSON: ${(e as Error).message}`);
  }
  const list = (parsed as { plugins?: unknown } | null)?.plugins;
  if (list === undefined) return [];
  if (!Array.isArray(list)) throw usage(`config ${file}: "plugins" must be a list`);
  const base = dirname(resolve(file));
  return list.map((entry: unknown, i) => {
    if (typeof entry === 'string' && entry !== '') return { module: entry, base };
    const e = entry as { module?: unknown; options?: unknown } | null;
    if (e && typeof e === 'object' && typeof e.module === 'string' && e.module !== '') return { module: e.module, options: e.options, base };
    throw usage(`config ${file}: plugins[${i}] must be a module name or { "module": "…", "options": … }`);
  });
}

/** The specs an invocation asks for: the config file's first, then each `--plugin`. */
export function pluginSpecs(args: { plugin?: string[]; config?: string }, defaultConfig?: string): PluginSpec[] {
  const config = args.config ?? (defaultConfig && existsSync(defaultConfig) ? defaultConfig : undefined);
  const specs = [...(config ? readPluginConfig(config) : []), ...(args.plugin ?? []).map((p) => parsePluginArg(p))];
  if (specs.length > MAX_PLUGINS) throw inputTooLarge(`at most ${MAX_PLUGINS} plugins may be loaded`);
  return specs;
}

function isPath(module: string): boolean {
  return module.startsWith('.') || isAbsolute(module);
}

/** The file to import for a spec: a path (a file, or a folder with a package.json), or a package name. */
function resolveSpec(spec: PluginSpec): string {
  const require = createRequire(join(spec.base, 'noop.js'));
  if (isPath(spec.module)) {
    const path = resolve(spec.base, spec.module);
    if (!existsSync(path)) throw new MeshpError('MESHP_PLUGIN_INVALID', `plugin ${spec.module}: ${path} does not exist`);
    if (statSync(path).isDirectory()) {
      const manifest = join(path, 'package.json');
      if (existsSync(manifest)) {
        const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { exports?: unknown; main?: string };
        const entry = exportEntry(pkg.exports) ?? pkg.main ?? 'index.js';
        return resolve(path, entry);
      }
      return join(path, 'index.js');
    }
    return path;
  }
  try {
    return require.resolve(spec.module);
  } catch (e) {
    throw new MeshpError('MESHP_PLUGIN_INVALID', `plugin ${spec.module}: not found from ${spec.base} (${(e as Error).message.split('\n')[0]})`);
  }
}

/** The file a package's `exports` names for its root, where it names one. */
function exportEntry(exports: unknown): string | undefined {
  if (typeof exports === 'string') return exports;
  const root = (exports as Record<string, unknown> | undefined)?.['.'] ?? exports;
  if (typeof root === 'string') return root;
  const conditions = root as Record<string, unknown> | undefined;
  for (const key of ['import', 'default', 'node']) {
    const v = conditions?.[key];
    if (typeof v === 'string') return v;
    const nested = exportEntry(v);
    if (nested) return nested;
  }
  return undefined;
}

function isPlugin(v: unknown): v is Plugin {
  return typeof v === 'object' && v !== null && typeof (v as Plugin).name === 'string' && typeof (v as Plugin).apply === 'function';
}

/** Makes the plugin a module exports: an object as it is, a class with `new`, a factory by calling it. */
function instantiate(spec: PluginSpec, exported: unknown): Plugin {
  if (isPlugin(exported)) {
    if (spec.options !== undefined) throw new MeshpError('MESHP_PLUGIN_INVALID', `plugin ${spec.module} exports a plugin object: it takes no options`);
    return exported;
  }
  if (typeof exported === 'function') {
    const fn = exported as { prototype?: { apply?: unknown } };
    let made: unknown;
    try {
      made =
        typeof fn.prototype?.apply === 'function'
          ? new (exported as new (o: unknown) => unknown)(spec.options)
          : (exported as (o: unknown) => unknown)(spec.options);
    } catch (e) {
      throw new MeshpError('MESHP_PLUGIN_INVALID', `plugin ${spec.module} refused its options: ${(e as Error).message}`, { cause: e });
    }
    if (isPlugin(made)) return made;
  }
  throw new MeshpError(
    'MESHP_PLUGIN_INVALID',
    `plugin ${spec.module}: its default export is not a plugin ({ name, apiVersion, apply(host) }), a plugin class or a function returning one`,
  );
}

/** Imports and makes every plugin asked for, in order. */
export async function loadPlugins(specs: PluginSpec[]): Promise<Plugin[]> {
  const plugins: Plugin[] = [];
  for (const spec of specs) {
    const file = resolveSpec(spec);
    let mod: { default?: unknown; plugin?: unknown };
    try {
      mod = (await import(pathToFileURL(file).href)) as { default?: unknown; plugin?: unknown };
    } catch (e) {
      throw new MeshpError('MESHP_PLUGIN_INVALID', `plugin ${spec.module} could not be loaded from ${file}: ${(e as Error).message}`, { cause: e });
    }
    plugins.push(instantiate(spec, mod.default ?? mod.plugin));
  }
  return plugins;
}

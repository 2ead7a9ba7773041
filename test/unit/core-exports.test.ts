/**
 * @meshp/core's root is the plugin contract, the errors and the model (core/src/index.ts says why);
 * helpers are under subpaths. A helper exported from the root again fails here: move it to a
 * subpath, or add it below with the reason it is contract, error or model.
 */
import t from 'tap';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as core from '@meshp/core';

const CORE = join(dirname(fileURLToPath(import.meta.url)), '../../core');

/** Every runtime name the root exports, by what it is. */
const ROOT = {
  // What a plugin states and taps with (contract/plugin.ts, providers.ts), and the typed admin map (contract/admin.ts).
  contract: ['PLUGIN_API_VERSION', 'STAGES', 'LABEL_MODULE', 'LABEL_NODE', 'LABEL_SPEC_HASH', 'adminMethod'],
  errors: ['CODES', 'MeshpError', 'isMeshpError'],
  model: ['MODES', 'RESOURCE_KINDS', 'resourceKey', 'openingId', 'toOpening'],
};

/** Each subpath, with a few names it must hold (what its importers lean on). */
const SUBPATHS: Record<string, string[]> = {
  host: ['Host', 'chooseFirewall', 'NO_FIREWALL'],
  agent: ['Agent', 'Backoff', 'decodeToken', 'challengePayload'],
  delta: ['DeltaApplier', 'stateHash', 'WIRE_MODE', 'computeSnapshot', 'affectedBy', 'nextDelta', 'NetworkState'],
  reconcile: ['Reconciler', 'containerSpecHash'],
  lifecycle: ['flip', 'buildPreview', 'checkGenesis'],
  catalogue: ['checkManifest', 'fillSettings'],
  schema: ['checkInput', 'checkPolicy'],
  net: ['cidrSpan', 'placeOpening', 'reachThrough'],
  store: ['hashSecret', 'revokeRow', 'tokenFromRow', 'HOSTING_TABLES'],
  util: ['sanitize', 'logOptions', 'oneLine'],
};

t.test('the root exports exactly the contract, the errors and the model', async (t) => {
  const documented = [...ROOT.contract, ...ROOT.errors, ...ROOT.model].sort();
  t.same(Object.keys(core).sort(), documented);
  t.equal(core.PLUGIN_API_VERSION, 1, 'apiVersion covers the root');
  t.ok(new core.MeshpError('MESHP_USAGE', 'x') instanceof Error);
});

t.test('each subpath resolves, holds its helpers, and no name is exported twice', async (t) => {
  const seen = new Map<string, string>(Object.keys(core).map((n) => [n, '.']));
  for (const [sub, must] of Object.entries(SUBPATHS)) {
    const mod = (await import(`@meshp/core/${sub}`)) as Record<string, unknown>;
    const names = Object.keys(mod);
    for (const n of must) t.ok(names.includes(n), `@meshp/core/${sub} exports ${n}`);
    for (const n of names) {
      t.notOk(seen.has(n), `${n} of ${sub} is not also exported by ${seen.get(n) ?? '-'}`);
      seen.set(n, sub);
    }
  }
});

t.test("package.json's exports: one per folder with an index, each with types, all in the packed files", async (t) => {
  const pkg = JSON.parse(readFileSync(join(CORE, 'package.json'), 'utf8')) as {
    exports: Record<string, { types: string; default: string }>;
    files: string[];
  };
  const folders = readdirSync(join(CORE, 'src'), { withFileTypes: true })
    .filter((d) => d.isDirectory() && existsSync(join(CORE, 'src', d.name, 'index.ts')))
    .map((d) => d.name)
    .sort();
  t.same(folders, Object.keys(SUBPATHS).sort(), 'the subpaths tested are the folders with an index');
  t.same(Object.keys(pkg.exports).sort(), ['.', ...folders.map((f) => `./${f}`)].sort());
  for (const [key, entry] of Object.entries(pkg.exports)) {
    const base = key === '.' ? 'dist/index' : `dist/${key.slice(2)}/index`;
    t.same(entry, { types: `./${base}.d.ts`, default: `./${base}.js` }, `${key} names its types and code`);
    t.ok(existsSync(join(CORE, `${base}.d.ts`)) && existsSync(join(CORE, `${base}.js`)), `${key} is built`);
    t.ok(
      pkg.files.some((f) => base.startsWith(f)),
      `${key} is in the package's files`,
    );
  }
});

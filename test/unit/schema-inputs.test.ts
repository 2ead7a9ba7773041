/**
 * The one schema of inputs (core/src/schema): the JSON Schema files under schemas/ are what the
 * schema makes; the examples pass; each invalid input issue 11 and issue 13 (item 7) found is
 * refused with a code and the field named, never with an uncoded exception.
 */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MeshpError } from '@meshp/core';
import { validateDeclaration } from '@meshp/core/reconcile';
import { checkManifest } from '@meshp/core/catalogue';
import { checkModuleDefs, jsonSchemaFiles, readCatalogueFile, readPolicyFile } from '@meshp/core/schema';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '../..');

function refused(t: Subtest, fn: () => unknown, code: RegExp, field: RegExp, what: string): void {
  try {
    fn();
    t.fail(`${what}: accepted`);
  } catch (e) {
    t.ok(e instanceof MeshpError, `${what}: a coded MeshpError (${String(e)})`);
    t.match((e as MeshpError).code, code, `${what}: code`);
    t.match((e as Error).message, field, `${what}: names the field`);
  }
}

const decl = (modules: unknown[], extra: Record<string, unknown> = {}) => ({
  apiVersion: 'meshp/v1',
  node: 'n1',
  mode: 'adopted',
  settings: { ports: {} },
  modules,
  ...extra,
});

t.test('the committed JSON Schema files are the ones the schema makes (UPDATE_SCHEMAS=1 rewrites them)', async (t) => {
  const files = jsonSchemaFiles();
  for (const [name, doc] of Object.entries(files)) {
    const text = `${JSON.stringify(doc, null, 2)}\n`;
    if (process.env.UPDATE_SCHEMAS === '1') writeFileSync(join(ROOT, 'schemas', name), text);
    t.equal(readFileSync(join(ROOT, 'schemas', name), 'utf8'), text, `schemas/${name} is current`);
  }
  t.same(readdirSync(join(ROOT, 'schemas')).sort(), Object.keys(files).sort(), 'no stale schema file');
});

t.test('the examples pass: catalogue manifests and host apply declarations', async (t) => {
  for (const f of readdirSync(join(ROOT, 'examples/catalogue')).filter((x) => x.endsWith('.json'))) {
    t.doesNotThrow(() => checkManifest(JSON.parse(readFileSync(join(ROOT, 'examples/catalogue', f), 'utf8')), f), f);
  }
  for (const f of readdirSync(join(ROOT, 'examples/host-apply')).filter((x) => x.endsWith('.json'))) {
    t.doesNotThrow(() => validateDeclaration(JSON.parse(readFileSync(join(ROOT, 'examples/host-apply', f), 'utf8'))), f);
  }
});

t.test('issue 13 item 7: each crash and each gap is a coded refusal naming the field', async (t) => {
  const c = (extra: Record<string, unknown>) => decl([{ name: 'm', taken: true, containers: [{ name: 'web', image: 'i', ...extra }] }]);
  refused(t, () => validateDeclaration(c({ ports: 80 })), /^MESHP_DECLARATION_INVALID$/, /containers\[0\]\.ports/, 'container ports not a list');
  refused(t, () => validateDeclaration(c({ ports: [null] })), /^MESHP_DECLARATION_INVALID$/, /ports\[0\]/, 'a null port entry');
  refused(
    t,
    () => validateDeclaration(decl([{ name: 'm', taken: true, openings: [{ id: { x: 1 }, port: 80, path: 'incoming' }] }])),
    /^MESHP_DECLARATION_INVALID$/,
    /openings\[0\]\.id/,
    'an object opening id',
  );
  let deep: Record<string, unknown> = { v: 'x' };
  for (let i = 0; i < 10_000; i++) deep = { e: deep };
  refused(t, () => validateDeclaration(c({ env: deep })), /^MESHP_DECLARATION_INVALID$/, /nested deeper than/, 'a 10,000-level nested env');
  for (const r of ['300.1.1.1/99', 'dead/8', '10.0.0.0/33', '1.2.3.4/x']) {
    refused(
      t,
      () => validateDeclaration(decl([{ name: 'm', taken: true, openings: [{ port: 80, path: 'incoming', from: [r] }] }])),
      /^MESHP_DECLARATION_INVALID$/,
      /openings\[0\]\.from\[0\]/,
      `range ${r}`,
    );
  }
  for (const mode of ['6777', '4755', '1777', 'x', '999']) {
    refused(
      t,
      () => validateDeclaration(decl([{ name: 'm', taken: true, files: [{ path: '/etc/f', content: '', mode }] }])),
      /^MESHP_DECLARATION_INVALID$/,
      /files\[0\]\.mode/,
      `mode ${mode}`,
    );
  }
  refused(
    t,
    () => validateDeclaration(decl([{ name: 'm', taken: true, files: [{ path: '/etc/../x', content: '' }] }])),
    /^MESHP_PATH_ESCAPES_ROOT$/,
    /files\[0\]\.path/,
    'a .. path',
  );
  refused(
    t,
    () => validateDeclaration(decl([{ name: 'x'.repeat(120), taken: true, openings: [{ port: 80, path: 'incoming' }] }])),
    /^MESHP_DECLARATION_INVALID$/,
    /opening id/,
    'an opening id no firewall comment can carry',
  );
});

t.test('issue 11 case 4: invalid policies and catalogue modules are refused, naming the field', async (t) => {
  refused(t, () => readPolicyFile({ rulez: [{ from: 'a', to: 'b' }] }), /^MESHP_POLICY_INVALID$/, /rulez/, 'a policy of "rulez"');
  refused(t, () => readPolicyFile({ rules: [{ from: 'a', to: 'b', ports: ['eighty'] }] }), /^MESHP_POLICY_INVALID$/, /rules\[0\]\.ports\[0\]/, 'port "eighty"');
  refused(t, () => readPolicyFile({ rules: [{ from: 'a' }] }), /^MESHP_POLICY_INVALID$/, /rules\[0\]\.to/, 'a rule without to');
  t.same(readPolicyFile({ rules: [] }), [], 'an empty policy said in so many words is one');
  t.same(readPolicyFile({ rules: [{ from: 'a', to: 'b', ports: [80, '8000-8100', '53/udp'] }] }), [
    { from: 'a', to: 'b', ports: ['80', '8000-8100', '53/udp'] },
  ]);
  refused(
    t,
    () => readCatalogueFile({ name: 'web', files: [{ path: 'etc/web.conf', content: '' }] }),
    /^MESHP_PATH_INVALID$/,
    /files\[0\]\.path/,
    'a relative path',
  );
  refused(
    t,
    () => readCatalogueFile({ name: 'web', files: [{ path: '/etc/web.conf', content: '', mode: 'x' }] }),
    /^MESHP_DECLARATION_INVALID$/,
    /files\[0\]\.mode/,
    'mode "x"',
  );
  refused(
    t,
    () =>
      readCatalogueFile({
        modules: [
          { name: 'a', files: [{ path: '/f', content: '' }] },
          { name: 'b', files: [{ path: '/f', content: '' }] },
        ],
      }),
    /^MESHP_DECLARATION_INVALID$/,
    /declared by both/,
    'one file in two modules defined together',
  );
  refused(t, () => checkModuleDefs([{ name: 'web', file: [] }]), /^MESHP_DECLARATION_INVALID$/, /file/, 'an unknown key');
  t.same(
    readCatalogueFile({ name: 'web', openings: [{ port: 80, path: 'incoming', from: ['{{privateRange}}'] }] })[0]!.openings![0]!.from,
    ['{{privateRange}}'],
    "a catalogue module may open to the node's private range",
  );
});

/**
 * The generated code committed under lib/protocol/src/gen is what `buf generate` makes of
 * proto/meshp/v1 today: a field added to control.proto without regenerating fails here, not on the wire.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const REPO = process.cwd();

t.test('the committed generated code matches control.proto', async (t) => {
  const out = mkdtempSync(join(tmpdir(), 'meshp-gen-'));
  t.teardown(() => rmSync(out, { recursive: true, force: true }));
  const template = readFileSync(join(REPO, 'proto/buf.gen.yaml'), 'utf8')
    .replace(/out: .*/, `out: ${out}`)
    .replace('local: ../node_modules/.bin/protoc-gen-ts_proto', `local: ${join(REPO, 'node_modules/.bin/protoc-gen-ts_proto')}`);
  const file = join(out, 'buf.gen.yaml');
  writeFileSync(file, template);
  const r = spawnSync(join(REPO, 'node_modules/.bin/buf'), ['generate', '--template', file], { cwd: join(REPO, 'proto'), encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  const fresh = readFileSync(join(out, 'meshp/v1/control.ts'), 'utf8');
  const committed = readFileSync(join(REPO, 'lib/protocol/src/gen/meshp/v1/control.ts'), 'utf8');
  t.ok(fresh === committed, 'regenerate with `cd proto && npx buf generate` and commit the result');
});

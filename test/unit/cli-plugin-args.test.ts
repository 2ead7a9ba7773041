import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';
import { parsePluginArg, pluginSpecs, readPluginConfig } from '../../bin/src/plugins/load.js';
import { logLevel, tokenFrom } from '../../bin/src/remote/agent.js';
import { MESHP } from '../helpers/grpc-procs.js';

t.test('--plugin MODULE and MODULE=OPTIONS_JSON', async (t) => {
  t.same(parsePluginArg('@acme/meshp-kind', '/b'), { module: '@acme/meshp-kind', base: '/b' });
  t.same(parsePluginArg('./k.js={"a":[1]}', '/b'), { module: './k.js', options: { a: [1] }, base: '/b' });
  t.same(parsePluginArg('./a=b.js', '/b'), { module: './a=b.js', base: '/b' }, 'an "=" not followed by JSON is part of the name');
  t.throws(() => parsePluginArg('./k.js={oops}'), { code: 'MESHP_USAGE' });
  t.throws(() => parsePluginArg('={"a":1}'), { code: 'MESHP_USAGE' });
});

t.test('a config file: names or {module, options}, resolved from its folder; anything else refused', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-conf-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'agent.json');
  writeFileSync(file, JSON.stringify({ plugins: ['./a.js', { module: 'b', options: { x: 1 } }] }));
  t.same(readPluginConfig(file), [
    { module: './a.js', base: dir },
    { module: 'b', options: { x: 1 }, base: dir },
  ]);
  writeFileSync(file, JSON.stringify({ plugins: [7] }));
  t.throws(() => readPluginConfig(file), { code: 'MESHP_USAGE', message: /plugins\[0\]/ });
  writeFileSync(file, '{');
  t.throws(() => readPluginConfig(file), { code: 'MESHP_USAGE', message: /not JSON/ });
  t.same(pluginSpecs({}, join(dir, 'absent.json')), [], 'an absent default config file is no plugins');
});

t.test('the token comes from --token, --token-file or MESHP_TOKEN; never two flags at once', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-tok-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, 'tok'), '  abc.def \n');
  t.equal(tokenFrom(undefined, join(dir, 'tok'), 'env'), 'abc.def');
  t.equal(tokenFrom('flag', undefined, 'env'), 'flag');
  t.equal(tokenFrom(undefined, undefined, 'env'), 'env');
  t.equal(tokenFrom(undefined, undefined, undefined), undefined);
  t.throws(() => tokenFrom('a', join(dir, 'tok'), undefined), { code: 'MESHP_USAGE' });
  t.throws(() => tokenFrom(undefined, join(dir, 'nope'), undefined), { code: 'MESHP_USAGE' });
  writeFileSync(join(dir, 'empty'), '\n');
  t.throws(() => tokenFrom(undefined, join(dir, 'empty'), undefined), { code: 'MESHP_USAGE', message: /empty/ });
});

t.test('MESHP_LOG_LEVEL takes pino level names and refuses others', async (t) => {
  t.equal(logLevel(undefined), 'info');
  t.equal(logLevel('debug'), 'debug');
  t.throws(() => logLevel('loud'), { code: 'MESHP_USAGE' });
});

t.test('meshp completion prints a completion script naming its commands', async (t) => {
  const r = spawnSync(process.execPath, [MESHP, 'completion'], { encoding: 'utf8' });
  t.equal(r.status, 0);
  t.match(r.stdout, /meshp completion/);
  const words = spawnSync(process.execPath, [MESHP, '--get-yargs-completions', 'meshp', 'no'], { encoding: 'utf8' });
  t.match(words.stdout, /node/);
});

t.test('meshp is linked into node_modules/.bin, so `npx meshp` works from the checkout', async (t) => {
  const r = spawnSync(join(process.cwd(), 'node_modules/.bin/meshp'), ['--help'], { encoding: 'utf8' });
  t.equal(r.status, 0, r.stderr);
  t.match(r.stdout, /meshp <command>/);
});

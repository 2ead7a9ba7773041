/**
 * Plugins loaded by name through the real CLI: `--plugin MODULE[=OPTIONS_JSON]`, a config file's
 * `plugins` list, and the errors an operator reads when one does not fit. Each `meshp host apply`
 * runs inside a namespace of its own, so the default firewall plugins probe an empty firewall.
 */
import t from 'tap';
import { spawn, spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { labAvailable, netns, runPrefix, type Netns } from '../helpers/netns.js';
import { MESHP, createToken, startController, waitUntil, workdir } from '../helpers/grpc-procs.js';

const CORE = pathToFileURL(join(process.cwd(), 'core/dist/index.js')).href;

/** A plugin an author would write: adds a fact to the node's report and logs what it was given. */
const STAMP_PLUGIN = `
import { PLUGIN_API_VERSION } from '${CORE}';
export default class StampPlugin {
  name = 'stamp';
  apiVersion = PLUGIN_API_VERSION;
  constructor(options = {}) {
    if (typeof options.label !== 'string') throw new Error('stamp needs a string "label"');
    this.label = options.label;
  }
  apply(host) {
    host.hooks.report.tapPromise(this.name, async (report) => ({ ...report, facts: { ...report.facts, stamp: this.label } }));
  }
}
`;

const SECOND_FILES = `
export default () => ({ name: 'other-files', apiVersion: 1, apply(host) {
  host.hooks.files.tapPromise('other-files', async () => ({ read: async () => null, write: async () => {}, remove: async () => {} }));
} });
`;

const OLD_CONTRACT = `export default { name: 'old-kind', apiVersion: 0, apply() {} };`;

const DECLARATION = {
  apiVersion: 'meshp/v1',
  node: 'n1',
  mode: 'adopted',
  settings: { ports: {} },
  modules: [{ name: 'web', taken: true, files: [{ path: '/etc/web/motd', content: 'hello\n', mode: '0644' }] }],
};

function run(ns: Netns, args: string[], cwd: string): { code: number | null; out: string; err: string } {
  const [cmd, argv] = ns.wrap(process.execPath, [MESHP, ...args]);
  const r = spawnSync(cmd, argv, { cwd, encoding: 'utf8', timeout: 60_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  const dir = workdir(t, 'plugins');
  writeFileSync(join(dir, 'stamp.mjs'), STAMP_PLUGIN);
  writeFileSync(join(dir, 'second-files.mjs'), SECOND_FILES);
  writeFileSync(join(dir, 'old.mjs'), OLD_CONTRACT);
  const declaration = join(dir, 'declaration.json');
  writeFileSync(declaration, JSON.stringify(DECLARATION));
  const ns = await netns(t, `${runPrefix('plg')}`);

  const apply = (tag: string, ...extra: string[]) => {
    const base = join(dir, tag);
    mkdirSync(join(base, 'root'), { recursive: true });
    const r = run(
      ns,
      [
        'host',
        'apply',
        '--state',
        join(base, 'state'),
        '--root',
        join(base, 'root'),
        '--declaration',
        declaration,
        '--docker-socket',
        join(base, 'no-docker.sock'),
        '--yes',
        '--json',
        ...extra,
      ],
      dir,
    );
    return { ...r, base };
  };

  t.test('--plugin ./file=OPTIONS loads a plugin by path and hands it its options', async (t) => {
    const r = apply('stamp', '--plugin', './stamp.mjs={"label":"from-the-cli"}');
    t.equal(r.code, 0, r.err);
    const out = JSON.parse(r.out) as { report: { facts: Record<string, unknown> } };
    t.equal(out.report.facts.stamp, 'from-the-cli', 'the plugin ran in the report hook with its options');
    t.equal(readFileSync(join(r.base, 'root/etc/web/motd'), 'utf8'), 'hello\n', 'the default plugins still did their part');
  });

  t.test('a config file lists plugins; relative paths are read from its folder', async (t) => {
    const sub = join(dir, 'conf');
    mkdirSync(sub, { recursive: true });
    writeFileSync(join(sub, 'agent.json'), JSON.stringify({ plugins: [{ module: '../stamp.mjs', options: { label: 'from-config' } }] }));
    const r = apply('config', '--config', join(sub, 'agent.json'));
    t.equal(r.code, 0, r.err);
    t.equal((JSON.parse(r.out) as { report: { facts: Record<string, unknown> } }).report.facts.stamp, 'from-config');
  });

  t.test('a plugin that refuses its options is named, and nothing is written', async (t) => {
    const r = apply('badopts', '--plugin', './stamp.mjs={"label":7}');
    t.equal(r.code, 1);
    t.match(r.err, /MESHP_PLUGIN_INVALID.*stamp\.mjs refused its options: stamp needs a string/);
  });

  t.test('options that are not JSON are a usage error', async (t) => {
    const r = apply('notjson', '--plugin', './stamp.mjs={label:7}');
    t.equal(r.code, 2, 'usage errors exit 2');
    t.match(r.err, /MESHP_USAGE.*not JSON/);
  });

  t.test('a second provider of the file store is MESHP_PROVIDER_TWICE, naming both plugins', async (t) => {
    const r = apply('twice', '--plugin', './second-files.mjs');
    t.equal(r.code, 1);
    t.match(r.err, /MESHP_PROVIDER_TWICE.*files-local and other-files each provide files/);
  });

  t.test('a plugin of another contract version is refused by name', async (t) => {
    const r = apply('old', '--plugin', './old.mjs');
    t.equal(r.code, 1);
    t.match(r.err, /MESHP_PLUGIN_INVALID.*old-kind speaks contract 0/);
  });

  t.test('a module that is not there is refused naming it', async (t) => {
    const r = apply('missing', '--plugin', '@nobody/meshp-no-such-plugin');
    t.equal(r.code, 1);
    t.match(r.err, /MESHP_PLUGIN_INVALID.*@nobody\/meshp-no-such-plugin: not found/);
  });

  t.test('the agent reads its token from a file, loads --plugin, and stops promptly on SIGTERM', async (t) => {
    const ctl = await startController(t, join(dir, 'ctl'));
    const tokenFile = join(dir, 'token');
    writeFileSync(tokenFile, `${createToken(ctl)}\n`, { mode: 0o600 });
    const base = join(dir, 'agent');
    mkdirSync(join(base, 'root'), { recursive: true });
    const args = [
      'agent',
      '--state',
      join(base, 'state'),
      '--controller',
      ctl.address,
      '--name',
      'a1',
      '--root',
      join(base, 'root'),
      '--firewall',
      'none',
      '--docker-socket',
      join(base, 'no-docker.sock'),
      '--interval',
      '1',
      '--token-file',
      tokenFile,
      '--plugin',
      './stamp.mjs={"label":"agent"}',
    ];
    const child = spawn(process.execPath, [MESHP, ...args], { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, MESHP_LOG_LEVEL: 'info' } });
    t.teardown(() => {
      if (child.exitCode === null && child.signalCode === null) process.kill(child.pid!, 'SIGKILL');
    });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    await waitUntil('the agent applies its first view', () => out.includes('"msg":"applied"'), 60_000);
    t.notOk(JSON.stringify(args).includes(readFileSync(tokenFile, 'utf8').trim()), 'the token never reached argv');
    process.kill(child.pid!, 'SIGTERM');
    t.equal(await exited, 0, 'a clean stop');
  });
}

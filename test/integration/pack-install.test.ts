/**
 * meshp installs like a CLI: every package packed with `npm pack`, installed into an empty folder
 * (no workspace, no checkout on the path), runs from node_modules/.bin, ships its default catalogue;
 * a firewall-kind plugin written there from the testkit's template passes the installed testkit
 * (run by plain node), and `meshp host apply --plugin ./my-kind` applies with it inside a
 * namespace of the test's own (issue 17's "Done when").
 *
 * Third-party packages come through npm as usual (its cache first). The one native addon
 * (better-sqlite3) is not compiled again: its build from this checkout, for this Node, is copied in.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { cpSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';
import { workdir } from '../helpers/grpc-procs.js';
import { NFT_CONFIG } from '../helpers/testkit-beds.js';

const REPO = process.cwd();
const WORKSPACES = ['core', 'bin', ...['lib', 'plugins'].flatMap((d) => readdirSync(join(REPO, d)).map((p) => `${d}/${p}`))];

function npm(args: string[], cwd: string): string {
  const r = spawnSync('npm', args, { cwd, encoding: 'utf8', timeout: 240_000 });
  if (r.status !== 0) throw new Error(`npm ${args.join(' ')} → ${r.status}: ${r.stderr.slice(-2000)}`);
  return r.stdout;
}

/** The author's test of their kind (the template's nftables ruleset as the found firewall), for plain node. */
const KIND_TEST = String.raw`import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { ADDRESSES, firewallConformance, standalone } from '@meshp/testkit';
import MyKindPlugin from './index.mjs';

const CONFIG = ${JSON.stringify(NFT_CONFIG)};
/** The ruleset's objects but the mesh's, without handles and counters. */
async function foundRules(lab) {
  const doc = JSON.parse((await lab.server.exec('nft', ['-j', 'list', 'ruleset'])).stdout);
  return doc.nftables
    .map((item) => Object.entries(item)[0])
    .filter(([kind, body]) => kind !== 'metainfo' && !String(body.table ?? body.name).startsWith('meshp') && !JSON.stringify(body).includes('meshp:'))
    .map(([kind, { handle, ...rest }]) => kind + ' ' + JSON.stringify(rest).replace(/"counter":\{[^}]*\}/g, '"counter":{}'));
}

await standalone('my-kind', (t) => firewallConformance(t, {
  kind: 'mykind',
  async setup(lab) {
    const file = join(lab.root, 'etc/mykind.conf');
    await writeFile(file, CONFIG);
    const reload = async () => void (await lab.server.exec('nft', ['-f', file]));
    await reload();
    return { plugin: new MyKindPlugin({ netns: lab.server.name, privateRange: ADDRESSES.privateRange }), reload, foundRules: () => foundRules(lab) };
  },
}));
`;

if (!labAvailable()) t.plan(0, 'needs root to build network namespaces');
else {
  t.test('the packed packages install into an empty folder and run', async (t) => {
    const dir = workdir(t, 'pack');
    const tarballs = join(dir, 'tarballs');
    mkdirSync(tarballs);
    npm(['pack', '--silent', ...WORKSPACES.flatMap((w) => ['-w', w]), '--pack-destination', tarballs], REPO);
    const packed = readdirSync(tarballs).filter((f) => f.endsWith('.tgz'));
    t.equal(packed.length, WORKSPACES.length, `one tarball per package: ${packed.join(' ')}`);

    const app = join(dir, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'operator-app', private: true, type: 'module' }));
    npm(['install', '--prefer-offline', '--ignore-scripts', '--no-audit', '--no-fund', ...packed.map((f) => join(tarballs, f))], app);
    const sqlite = (root: string) => JSON.parse(readFileSync(join(root, 'node_modules/better-sqlite3/package.json'), 'utf8')) as { version: string };
    t.equal(sqlite(app).version, sqlite(REPO).version, 'the same better-sqlite3 as the checkout');
    cpSync(join(REPO, 'node_modules/better-sqlite3/build'), join(app, 'node_modules/better-sqlite3/build'), { recursive: true });

    const meshp = join(app, 'node_modules/.bin/meshp');
    const help = spawnSync(meshp, ['--help'], { cwd: app, encoding: 'utf8' });
    t.equal(help.status, 0, help.stderr);
    t.match(help.stdout, /meshp host/);
    const catalogue = join(app, 'node_modules/@meshp/cli/catalogue');
    t.ok(existsSync(catalogue) && readdirSync(catalogue).length > 0, 'the default catalogue ships inside the CLI package');

    // Every entry of the installed core (the root and its helper subpaths) loads, with its types shipped.
    const coreDir = join(app, 'node_modules/@meshp/core');
    const entries = JSON.parse(readFileSync(join(coreDir, 'package.json'), 'utf8')).exports as Record<string, { types: string }>;
    const load = Object.keys(entries)
      .map((k) => `await import(${JSON.stringify(k === '.' ? '@meshp/core' : `@meshp/core/${k.slice(2)}`)});`)
      .join(' ');
    const loaded = spawnSync(process.execPath, ['--input-type=module', '-e', load], { cwd: app, encoding: 'utf8' });
    t.equal(loaded.status, 0, `every @meshp/core entry loads (${Object.keys(entries).length}): ${loaded.stderr}`);
    t.ok(
      Object.values(entries).every((e) => existsSync(join(coreDir, e.types))),
      'every entry ships its types',
    );

    // A plugin author's first kind, from the template the testkit ships: a package of its own.
    const kind = join(app, 'my-kind');
    mkdirSync(kind);
    copyFileSync(join(app, 'node_modules/@meshp/testkit/template/firewall-kind.mjs'), join(kind, 'index.mjs'));
    writeFileSync(join(kind, 'package.json'), JSON.stringify({ name: 'my-kind', private: true, type: 'module', exports: './index.mjs' }));
    // Its test, as the author writes it: the kit from the installed package, run by plain node.
    writeFileSync(join(kind, 'conformance.test.mjs'), KIND_TEST);
    const kit = spawnSync(process.execPath, ['my-kind/conformance.test.mjs'], { cwd: app, encoding: 'utf8', timeout: 240_000 });
    t.equal(
      kit.status,
      0,
      `the kit passes on the kind: ${kit.stdout
        .split('\n')
        .filter((l) => l.includes('not ok'))
        .join('; ')} ${kit.stderr.slice(-1000)}`,
    );
    const checks = kit.stdout.split('\n').filter((l) => /^ok \d+ - mykind: /.test(l));
    t.equal(checks.length, 7, `every check of the firewall suite ran and passed: ${checks.length}`);

    const ns = await netns(t, runPrefix('pak'));
    const root = join(dir, 'root');
    mkdirSync(join(root, 'etc'), { recursive: true });
    writeFileSync(join(root, 'etc/mykind.conf'), NFT_CONFIG);
    await ns.exec('nft', ['-f', join(root, 'etc/mykind.conf')]);
    const declaration = join(dir, 'declaration.json');
    writeFileSync(
      declaration,
      JSON.stringify({
        apiVersion: 'meshp/v1',
        node: 'n1',
        mode: 'adopted',
        settings: { ports: {} },
        modules: [{ name: 'web', taken: true, openings: [{ port: 9090, protocol: 'tcp', from: ['10.79.1.0/24'], path: 'incoming' }] }],
      }),
    );
    const [cmd, argv] = ns.wrap(meshp, [
      'host',
      'apply',
      '--plugin',
      './my-kind',
      '--firewall',
      'mykind',
      '--state',
      join(dir, 'state'),
      '--root',
      root,
      '--declaration',
      declaration,
      '--docker-socket',
      join(dir, 'no-docker.sock'),
      '--yes',
      '--json',
    ]);
    const r = spawnSync(cmd, argv, { cwd: app, encoding: 'utf8', timeout: 60_000 });
    t.equal(r.status, 0, r.stderr);
    const report = (JSON.parse(r.stdout) as { report: { firewall: { kind: string } } }).report;
    t.equal(report.firewall.kind, 'mykind', 'the kind the plugin speaks was used');
    t.match(
      (await ns.exec('nft', ['list', 'ruleset'])).stdout,
      /ct state invalid drop\n(.*\n)*\s*ip saddr \S+ tcp dport 9090 accept comment "meshp:web\/incoming\/tcp\/9090"\n\s*counter packets \d+ bytes \d+ reject/,
      'its opening is in the found chain, below its ct state invalid drop (so it needs no state match of its own) and above its reject',
    );
  });
}

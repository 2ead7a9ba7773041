/**
 * Issue 33 item 8: `make dist`'s tarball (packaging/dist.sh) installs meshp on a machine. Unpacked
 * into a temporary folder, its launcher runs — also through a symlink, as /usr/local/bin/meshp, the
 * path its systemd units run — with its own node_modules (the native SQLite addon included: a host
 * apply writes a state and a file under a temporary root, no firewall, no engine), and it ships the
 * catalogue and the units as in the checkout.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { mkdirSync, readFileSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { workdir } from '../helpers/grpc-procs.js';

const REPO = join(import.meta.dirname, '../..');

t.test('the dist tarball unpacks and runs', async (t) => {
  const dir = workdir(t, 'dist');
  const made = spawnSync(join(REPO, 'packaging/dist.sh'), [join(dir, 'out')], { encoding: 'utf8', timeout: 400_000 });
  t.equal(made.status, 0, made.stderr);
  const tarball = made.stdout.trim().split('\n').at(-1)!;
  t.match(tarball, /\/meshp-\d+\.\d+\.\d+-linux-[a-z0-9]+\.tar\.gz$/);
  const into = join(dir, 'opt');
  mkdirSync(into);
  t.equal(spawnSync('tar', ['-C', into, '-xzf', tarball]).status, 0, 'unpacks');
  const [top] = readdirSync(into);
  const home = join(into, top!);
  t.same(readdirSync(home).sort(), ['LICENSE', 'bin', 'lib', 'systemd']);

  // As installed: a link at the units' path (here a temporary one) to the launcher.
  const link = join(dir, 'usr-local-bin-meshp');
  symlinkSync(join(home, 'bin/meshp'), link);
  for (const launcher of [join(home, 'bin/meshp'), link]) {
    const help = spawnSync(launcher, ['--help'], { cwd: dir, encoding: 'utf8' });
    t.equal(help.status, 0, `${launcher} --help: ${help.stderr}`);
    t.match(help.stdout, /meshp genesis/);
  }
  t.match(spawnSync(link, ['genesis', '--help'], { encoding: 'utf8' }).stdout, /--images/, "this checkout's CLI");

  const decl = join(dir, 'decl.json');
  writeFileSync(
    decl,
    JSON.stringify({
      apiVersion: 'meshp/v1',
      node: 'n1',
      mode: 'adopted',
      settings: { ports: {} },
      modules: [{ name: 'motd', taken: true, files: [{ path: '/etc/motd.d/meshp', content: 'from the tarball\n', mode: '0644' }] }],
    }),
  );
  const apply = spawnSync(
    link,
    [
      'host',
      'apply',
      '--state',
      join(dir, 'state'),
      '--root',
      join(dir, 'root'),
      '--declaration',
      decl,
      '--firewall',
      'none',
      '--docker-socket',
      join(dir, 'no.sock'),
      '--yes',
    ],
    { cwd: dir, encoding: 'utf8' },
  );
  t.equal(apply.status, 0, `host apply from the tarball: ${apply.stderr}`);
  t.equal(readFileSync(join(dir, 'root/etc/motd.d/meshp'), 'utf8'), 'from the tarball\n');

  const shipped = join(home, 'lib/node_modules/@meshp/cli/catalogue');
  t.same(readdirSync(shipped).sort(), readdirSync(join(REPO, 'examples/catalogue')).sort(), 'the catalogue ships with the CLI');
  for (const unit of ['meshp-agent.service', 'meshp-controller.service']) {
    const text = readFileSync(join(home, 'systemd', unit), 'utf8');
    t.equal(text, readFileSync(join(REPO, 'examples/systemd', unit), 'utf8'), `${unit} as in examples/systemd`);
    t.match(text, /^ExecStart=\/usr\/local\/bin\/meshp /m, `${unit} runs /usr/local/bin/meshp, the link the README makes`);
  }
  t.notOk(
    readdirSync(join(home, 'lib/node_modules')).some((n) => ['tap', 'typescript', 'eslint', 'sinon'].includes(n)),
    'no dev dependency',
  );
});

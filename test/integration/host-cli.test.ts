/** The built `meshp host` CLI, run as an operator runs it, against a temporary root. */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';
import { assertPrivate } from '../helpers/modes.js';

const MESHP = join(dirname(fileURLToPath(import.meta.url)), '../../bin/dist/main.js');

// The CLI probes the firewall of the machine it runs on: run it in a lab namespace of its own
// (an empty ruleset), never against this machine's.
const ns = labAvailable() ? await netns(t, `${runPrefix('cl')}`) : null;
const CONF = '/etc/web/web.conf';
const FOUND = Buffer.from('listen 8080\n# the predecessor wrote this\n\u00e9\n');

function meshp(...args: string[]) {
  const [cmd, argv] = ns ? ns.wrap(process.execPath, [MESHP, ...args]) : [process.execPath, [MESHP, ...args]];
  const r = spawnSync(cmd, argv, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

function machine(t: Subtest) {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-cli-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  const state = join(dir, 'state');
  mkdirSync(join(root, 'etc/web'), { recursive: true });
  writeFileSync(join(root, CONF), FOUND);
  const declare = (modules: unknown[], mode = 'adopted') => {
    const f = join(dir, `decl-${Math.random().toString(36).slice(2)}.json`);
    writeFileSync(f, JSON.stringify({ apiVersion: 'meshp/v1', node: 'n1', mode, settings: { ports: {} }, modules }));
    return f;
  };
  const apply = (file: string, ...more: string[]) => meshp('host', 'apply', '--state', state, '--root', root, '--declaration', file, ...more);
  return { dir, root, state, declare, apply };
}

const web = (taken: boolean) => ({
  name: 'web',
  taken,
  files: [
    { path: CONF, content: 'mesh web\n' },
    { path: '/etc/web/extra.conf', content: 'extra\n' },
  ],
});

function states(out: string): Record<string, string> {
  const doc = JSON.parse(out) as { report: { resources: { key: string; state: string }[] } };
  return Object.fromEntries(doc.report.resources.map((r) => [r.key, r.state]));
}

t.test('the lifecycle of a found file through the CLI', async (t) => {
  const m = machine(t);

  const preview = m.apply(m.declare([web(false)]), '--preview');
  t.equal(preview.code, 0);
  t.match(preview.out, /hold\s+file\s+\/etc\/web\/web\.conf\s+web\s+held/);
  t.match(preview.out, /create\s+file\s+\/etc\/web\/extra\.conf/);
  t.notOk(existsSync(join(m.root, 'etc/web/extra.conf')), 'the preview wrote nothing');

  const unconfirmed = m.apply(m.declare([web(false)]));
  t.equal(unconfirmed.code, 1, 'no terminal, no --yes: refused');
  t.match(unconfirmed.err, /^MESHP_CONFIRM_NEEDED: .*--yes/);
  t.notOk(existsSync(join(m.root, 'etc/web/extra.conf')));

  const adopted = m.apply(m.declare([web(false)]), '--yes', '--json');
  t.equal(adopted.code, 0, adopted.err);
  t.same(states(adopted.out), { [`file:${CONF}`]: 'held', 'file:/etc/web/extra.conf': 'created' });
  t.same(readFileSync(join(m.root, CONF)), FOUND, 'the found file is held byte for byte');
  assertPrivate(t, m.state);

  writeFileSync(join(m.root, CONF), 'the predecessor is still writing\n');
  const changed = m.apply(m.declare([web(false)]), '--yes', '--json');
  t.equal(states(changed.out)[`file:${CONF}`], 'changed');
  t.equal(readFileSync(join(m.root, CONF), 'utf8'), 'the predecessor is still writing\n', 'not reverted');

  const status = meshp('host', 'status', '--state', m.state, '--json');
  t.equal(status.code, 0);
  const report = JSON.parse(status.out);
  t.equal(report.mode, 'adopted');
  t.equal(report.counts.changed, 1);
  const human = meshp('host', 'status', '--state', m.state);
  t.match(human.out, /mode adopted \(ADOPTED\)/);
  t.match(human.out, /\/etc\/web\/web\.conf\s+web\s+changed/);

  const taken = m.apply(m.declare([web(true)]), '--yes', '--json');
  t.same(states(taken.out), { [`file:${CONF}`]: 'owned', 'file:/etc/web/extra.conf': 'owned' });
  t.equal(readFileSync(join(m.root, CONF), 'utf8'), 'mesh web\n', 'taking converges it');
});

t.test('unassigning leaves held files where they are and removes the host own', async (t) => {
  const m = machine(t);
  t.equal(m.apply(m.declare([web(false)]), '--yes').code, 0);
  const gone = m.apply(m.declare([]), '--yes', '--json');
  t.equal(gone.code, 0, gone.err);
  t.same(states(gone.out), { [`file:${CONF}`]: 'released' });
  t.same(readFileSync(join(m.root, CONF)), FOUND);
  t.notOk(existsSync(join(m.root, 'etc/web/extra.conf')));
});

t.test('a path that escapes the root writes nothing and says why in one line', async (t) => {
  const m = machine(t);
  mkdirSync(join(m.dir, 'outside'));
  symlinkSync(join(m.dir, 'outside'), join(m.root, 'etc/out'));
  for (const path of ['/etc/../../escape.conf', '/etc/out/escape.conf']) {
    const r = m.apply(
      m.declare([
        {
          name: 'bad',
          taken: true,
          files: [
            { path: '/etc/fine.conf', content: 'x' },
            { path, content: 'x' },
          ],
        },
      ]),
      '--yes',
    );
    t.equal(r.code, 1, path);
    t.match(r.err, /^MESHP_PATH_ESCAPES_ROOT: /);
    t.equal(r.err.trim().split('\n').length, 1, 'one line');
    t.notOk(existsSync(join(m.root, 'etc/fine.conf')), 'nothing written');
    t.notOk(existsSync(join(m.dir, 'escape.conf')) || existsSync(join(m.dir, 'outside/escape.conf')));
  }
  t.notOk(existsSync(join(m.state, 'host.db')) && meshp('host', 'status', '--state', m.state).code === 0, 'no report was saved');
});

t.test('bad input: a clear one-line error and exit codes 1 and 2', async (t) => {
  const m = machine(t);
  const f = join(m.dir, 'broken.json');
  writeFileSync(f, '{ not json');
  const broken = m.apply(f, '--yes');
  t.equal(broken.code, 1);
  t.match(broken.err, /^MESHP_DECLARATION_INVALID: .*not JSON/);
  const wrongMode = m.apply(m.declare([], 'sideways'), '--yes');
  t.equal(wrongMode.code, 1);
  t.match(wrongMode.err, /mode: must be "adopted" or "converged"/);
  const usage = meshp('host', 'apply', '--state', m.state);
  t.equal(usage.code, 2);
  t.match(usage.err, /^MESHP_USAGE: .*declaration/);
  const nothing = meshp('host', 'status', '--state', join(m.dir, 'nowhere'));
  t.equal(nothing.code, 1);
  t.match(nothing.err, /run meshp host apply first/);
  t.same(readFileSync(join(m.root, CONF)), FOUND);
});

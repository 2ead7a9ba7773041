/**
 * Nothing invalid is accepted and nothing changes unconfirmed (issue 11 cases 4, 6 and 7), with a
 * real controller and a real agent on 127.0.0.1: invalid policies and modules refused by the CLI and
 * by the controller, naming the field, with nothing stored; the confirm contract; exit codes,
 * not-found, JSON errors; a taken node name refused before the token is spent (the default name is the
 * host name, so a cloned machine meets this).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { AdminClient } from '@meshp/transport-grpc';
import { MESHP, createToken, meshpAsync, startAgent, startController, workdir, writeJson } from '../helpers/grpc-procs.js';

const dir = workdir(t, 'contract');
const ctl = await startController(t, join(dir, 'ctl'));
const admin = ['--state', ctl.state, '--controller', ctl.address];
/** One CLI run, not waited on synchronously: the independent checks of a case run side by side. */
const run = meshpAsync;
const cli = (...args: string[]) => run(...args, ...admin);
const cred = readAdminCredential(join(ctl.state, ADMIN_CREDENTIAL_FILE));
const adminClient = await AdminClient.connect({ address: ctl.address, fingerprint: cred.fingerprint, credential: cred.secret });
t.teardown(() => adminClient.close());
const n2 = startAgent(t, dir, 'n2', ctl.address, createToken(ctl, '--adopted'));
await n2.proc.waitFor((l) => l.msg === 'reconciled', 60_000);
const stateVersion = async () => Number((await adminClient.call('listNodes', { network: 'default' })).nodes[0]!.stateVersion);

t.test('invalid input is refused with a coded error naming the field, by the CLI and by the controller; nothing is stored', async (t) => {
  const before = await stateVersion();
  const [rulez, eighty, relative, modeX, mx] = await Promise.all([
    cli('policy', 'set', writeJson(dir, 'rulez.json', { rulez: [{ from: 'a', to: 'b' }] }), '--yes'),
    cli('policy', 'set', writeJson(dir, 'eighty.json', { rules: [{ from: 'a', to: 'b', ports: ['eighty'] }] }), '--yes'),
    cli('catalogue', 'add', writeJson(dir, 'rel.json', { name: 'rel', files: [{ path: 'etc/rel.conf', content: '' }] }), '--yes'),
    cli('catalogue', 'add', writeJson(dir, 'modex.json', { name: 'mx', files: [{ path: '/etc/mx', content: '', mode: 'x' }] }), '--yes', '--json'),
    cli('dns', 'set', writeJson(dir, 'mx-record.json', { records: [{ name: 'mail', type: 'MX', value: 'x' }] }), '--yes'),
  ]);
  t.match(mx.err, /^MESHP_DNS_INVALID: .*records\[0\]/, 'dns set: a record type it does not serve');
  t.equal(rulez.code, 1);
  t.match(rulez.err, /^MESHP_POLICY_INVALID: .*rulez/);
  t.match(eighty.err, /^MESHP_POLICY_INVALID: .*rules\[0\]\.ports\[0\]/);
  t.match(relative.err, /^MESHP_PATH_INVALID: .*files\[0\]\.path/);
  t.equal(modeX.code, 1);
  t.match(JSON.parse(modeX.err), { code: 'MESHP_DECLARATION_INVALID', message: /files\[0\]\.mode/ }, 'a --json command prints its error as JSON on stderr');
  // The controller checks on its own, whatever the client.
  await t.rejects(adminClient.call('setPolicy', { network: 'default', rules: [{ fromTag: 'a', toTag: 'b', ports: ['eighty'] }] }), {
    code: 'MESHP_POLICY_INVALID',
  });
  await t.rejects(adminClient.call('setPolicy', { network: 'default', rules: [{ fromTag: '', toTag: 'b', ports: [] }] }), { code: 'MESHP_POLICY_INVALID' });
  const dns = { nameservers: ['dns.example'], searchDomains: [], records: [], domain: '', splits: [] };
  await t.rejects(adminClient.call('setDns', { network: 'default', dns, preview: false }), { code: 'MESHP_DNS_INVALID' });
  await t.rejects(
    adminClient.call('addCatalogue', {
      network: 'default',
      modules: [{ name: 'rel', files: [{ path: 'etc/x', content: '', mode: '6777' }], containers: [], openings: [] }] as never,
    }),
    { code: /^MESHP_(PATH|DECLARATION)_INVALID$/ },
  );
  await t.rejects(
    adminClient.call('addCatalogue', {
      network: 'default',
      modules: [{ name: 'op', files: [], containers: [], openings: [{ port: 80, protocol: 1, path: 1, from: ['300.1.1.1/99'] }] }] as never,
    }),
    { code: 'MESHP_DECLARATION_INVALID' },
  );
  t.equal(await stateVersion(), before, 'nothing was stored');
});

t.test('the confirm contract: --preview changes nothing; off a terminal --yes is required', async (t) => {
  t.equal((await cli('catalogue', 'add', writeJson(dir, 'web.json', { name: 'web', files: [{ path: '/etc/web.conf', content: 'x' }] }), '--yes')).code, 0);
  const before = await stateVersion();
  const refused = [
    ['module', 'assign', 'n2', 'web'],
    ['module', 'take', 'n2', 'web'],
    ['module', 'unassign', 'n2', 'web'],
    ['node', 'adopt', 'n2'],
    ['node', 'converge', 'n2'],
    ['node', 'remove', 'n2'],
    ['catalogue', 'add', join(dir, 'web.json')],
    ['policy', 'set', writeJson(dir, 'p.json', { rules: [] })],
    ['dns', 'set', writeJson(dir, 'dns.json', { records: [{ name: 'printer', type: 'A', value: '100.96.9.9' }] })],
  ];
  const previewed = [
    ['module', 'assign', 'n2', 'web'],
    ['module', 'take', 'n2', 'web'],
    ['node', 'adopt', 'n2'],
    ['node', 'remove', 'n2'],
    ['catalogue', 'add', join(dir, 'web.json')],
    ['policy', 'set', join(dir, 'p.json')],
    ['dns', 'set', join(dir, 'dns.json')],
  ];
  // None of these changes anything (that is what is asserted), so they run side by side.
  const [refusals, previews] = await Promise.all([
    Promise.all(refused.map((args) => cli(...args))),
    Promise.all(previewed.map((args) => cli(...args, '--preview'))),
  ]);
  refused.forEach((args, i) => {
    t.equal(refusals[i]!.code, 1, `${args.join(' ')} without --yes off a terminal: refused`);
    t.match(refusals[i]!.err, /MESHP_CONFIRM_NEEDED/);
  });
  previewed.forEach((args, i) => {
    t.equal(previews[i]!.code, 0, `${args.join(' ')} --preview: ${previews[i]!.err}`);
    t.match(previews[i]!.out, /nothing changed/, `${args.join(' ')} --preview says what it would do, and that nothing changed`);
  });
  // Each says what it would do, the verb first (issue 33 item 11: "would module web on node n2" had none).
  const said = (args: string[]) => previews[previewed.findIndex((p) => p.join(' ') === args.join(' '))]!.out;
  t.match(said(['module', 'assign', 'n2', 'web']), /^would assign module web on node n2 \(adopted; .*\): its resources are prepared/);
  t.match(said(['module', 'take', 'n2', 'web']), /^would take module web on node n2 /);
  t.match(said(['node', 'remove', 'n2']), /^would remove node n2 from default \(addresses .*; tags .*\): its credential and node key are revoked for good/);
  t.match(refusals[refused.findIndex((p) => p.join(' ') === 'node remove n2')]!.err, /pass --yes to remove \(or --preview/);
  t.equal(await stateVersion(), before, 'nothing changed');
  t.ok(
    (await adminClient.call('listNodes', { network: 'default' })).nodes.some((n) => n.name === 'n2'),
    'n2 is still a member',
  );
});

/**
 * On a terminal: the CLI run under a pseudo-terminal by util-linux's `script` (bsdutils, essential on
 * Debian), its stdin the answer. The question is asked; only "yes" changes the node; "no" and an
 * end of input (Ctrl-D) leave it as it was.
 */
function onTerminal(answer: string, ...args: string[]): Promise<{ code: number | null; out: string }> {
  const line = [process.execPath, MESHP, ...args, ...admin].map((x) => `'${x.replace(/'/g, `'\\''`)}'`).join(' ');
  return new Promise((resolve, reject) => {
    const p = spawn('script', ['-qec', line, '/dev/null'], { stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '';
    p.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    p.once('error', reject);
    p.once('close', (code) => resolve({ code, out }));
    p.stdin.end(answer);
  });
}

t.test('on a terminal the command asks, and only a yes changes the node', async (t) => {
  const assigned = async () => (await adminClient.call('listNodes', { network: 'default' })).nodes[0]!.assignedModules;
  const before = await stateVersion();
  const answers = [
    ['no\n', 'no'],
    ['', 'an end of input'],
  ] as const;
  // Neither changes anything (that is what is asserted), so both run side by side.
  const runs = await Promise.all(answers.map(([answer]) => onTerminal(answer, 'module', 'assign', 'n2', 'web')));
  for (const [i, [, said]] of answers.entries()) {
    const r = runs[i]!;
    t.match(r.out, /assign module web on node n2 .*\? \[y\/N\]/, `asked (answered ${said})`);
    t.equal(r.code, 1, `${said}: refused`);
    t.match(r.out, /MESHP_CONFIRM_NEEDED: nothing was changed/);
    t.equal(await stateVersion(), before, `${said}: nothing changed`);
    t.notOk((await assigned()).includes('web'));
  }
  const yes = await onTerminal('yes\n', 'module', 'assign', 'n2', 'web');
  t.equal(yes.code, 0, yes.out);
  t.match(yes.out, /assign web on n2: assigned web/);
  t.ok((await assigned()).includes('web'), 'yes: assigned');
  t.ok((await stateVersion()) > before, 'yes: a new version');
  await adminClient.call('unassignModule', { network: 'default', node: 'n2', module: 'web' });
});

t.test('usage errors exit 2, not-found has its own code', async (t) => {
  const [ttl, noState, g, nosuch, js, doctorNoNode, doctorNoNodeJson] = await Promise.all([
    cli('token', 'create', '--ttl', '5x'),
    run('node', 'list'),
    run('genesis', '--port', 'bogus=1', '--state', join(dir, 'g')),
    cli('node', 'show', 'nosuch'),
    cli('node', 'show', 'nosuch', '--json'),
    cli('doctor'),
    cli('doctor', '--json'),
  ]);
  t.equal(doctorNoNode.code, 2, 'doctor without a node is a usage error (it was MESHP_INTERNAL)');
  t.match(doctorNoNode.err, /^MESHP_USAGE: name a node, or say --local --state DIR/);
  t.match(JSON.parse(doctorNoNodeJson.err), { code: 'MESHP_USAGE' });
  t.equal(ttl.code, 2);
  t.equal(noState.code, 2);
  t.match(noState.err, /^MESHP_USAGE: /);
  t.equal(g.code, 2, g.err);
  t.equal(nosuch.code, 1);
  t.match(nosuch.err, /^MESHP_NOT_FOUND: /);
  t.match(JSON.parse(js.err), { code: 'MESHP_NOT_FOUND' });
});

t.test('a second agent with a taken name is refused before its token is spent, told a free name', async (t) => {
  const token = createToken(ctl, '--adopted');
  const dup = startAgent(t, join(dir, 'dup'), 'n2', ctl.address, token);
  t.equal(await dup.proc.exited, 1);
  t.match(dup.proc.stderr, /MESHP_NAME_TAKEN: node n2 is already in default; the token is not spent: start this agent again with --name n2-2/);
  const again = startAgent(t, join(dir, 'dup2'), 'n2-2', ctl.address, token);
  await again.proc.waitFor((l) => l.msg === 'enrolled');
  t.pass('the same token enrols the machine under the name it was told');
  again.proc.kill('SIGTERM');
});

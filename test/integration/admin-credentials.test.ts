/**
 * Issue 28's named admin credentials, against real controllers over gRPC on 127.0.0.1 and the real
 * CLI: `meshp admin create|list|revoke`, each credential the actor of its calls in the audit log; a
 * read-only one reads and previews everything and changes nothing (each change refused
 * MESHP_FORBIDDEN, nothing changed, nothing recorded); a revoked one is refused at its next call,
 * also on the other replica of a PostgreSQL store; they survive a restart.
 */
import t from 'tap';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { meshpAsync, replicaState, startController, workdir, writeJson, type ControllerProc } from '../helpers/grpc-procs.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';

interface Entry {
  actor: string;
  method: string;
  summary: string;
}

/** The CLI against `ctl`, with the bootstrap credential (--state) or the one in `credential`. */
const cliOf = (ctl: () => ControllerProc, credential?: string) => {
  const cli = (...args: string[]) =>
    meshpAsync(...args, '--controller', ctl().address, ...(credential ? ['--credential', credential] : ['--state', ctl().state]));
  const ok = async (...args: string[]) => {
    const r = await cli(...args);
    if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
    return r.out;
  };
  return { cli, ok };
};

const auditOf = async (ok: (...a: string[]) => Promise<string>) => (JSON.parse(await ok('audit', '--json')) as { entries: Entry[] }).entries;

t.test('named credentials: the actor in the audit log, read-only changes nothing, a revoked one is refused at once', async (t) => {
  const dir = workdir(t, 'admins');
  const state = join(dir, 'ctl');
  let ctl = await startController(t, state);
  const root = cliOf(() => ctl);
  const opsFile = join(dir, 'ops.credential');
  const viewerFile = join(dir, 'viewer.credential');

  await root.ok('admin', 'create', 'ops', '--out', opsFile);
  const made = JSON.parse(await root.ok('admin', 'create', 'viewer', '--role', 'read-only', '--json')) as {
    admin: { name: string; role: string; revokedAt: string | null };
    credential: string;
  };
  t.match(made.admin, { name: 'viewer', role: 'read-only', revokedAt: null }, 'create --json: the record');
  t.match(made.credential, /^meshp-admin1\.[0-9a-f]{64}\.[A-Za-z0-9_-]{43}$/, 'and the credential, once');
  writeFileSync(viewerFile, `${made.credential}\n`, { mode: 0o600 });
  t.equal(statSync(opsFile).mode & 0o777, 0o600, '--out writes a 0600 file');
  const ops = cliOf(() => ctl, opsFile);
  const viewer = cliOf(() => ctl, viewerFile);

  // Refusals of bad input: a name taken, the bootstrap's name, a role that is none, an --out that exists.
  const taken = await root.cli('admin', 'create', 'ops');
  t.match(taken.err, /MESHP_NAME_TAKEN/, 'a name is given once');
  t.match((await root.cli('admin', 'create', 'admin')).err, /MESHP_USAGE.*first start/, "the bootstrap's name is not given");
  t.equal((await root.cli('admin', 'create', 'x1', '--role', 'root')).code, 2, 'a role that is none: usage');
  t.match(
    (await root.cli('admin', 'create', 'x2', '--out', opsFile)).err,
    /MESHP_USAGE: --out .* cannot be made \(EEXIST\)/,
    'an existing --out file is refused, not overwritten',
  );
  t.equal(readFileSync(opsFile, 'utf8').trim().length > 100, true, 'and kept as it was');
  t.match((await root.cli('admin', 'create', 'ops', '--out', join(dir, 'again.credential'))).err, /MESHP_NAME_TAKEN/, 'refused by the controller');
  t.notOk(existsSync(join(dir, 'again.credential')), 'its --out file is not left behind');

  // The named admin changes; the read-only one reads and previews, each change refused.
  const policy = writeJson(dir, 'p.json', { rules: [{ from: 'web', to: 'db', ports: ['5432'] }] });
  await ops.ok('policy', 'set', policy, '--yes');
  for (const read of [
    ['node', 'list'],
    ['policy', 'get'],
    ['policy', 'set', policy, '--preview'],
    ['policy', 'test', policy],
    ['audit'],
    ['token', 'list'],
    ['admin', 'list'],
    ['network', 'list'],
    ['catalogue', 'list'],
    ['dns', 'get'],
    ['dns', 'set', writeJson(dir, 'dns.json', { records: [{ name: 'printer', type: 'A', value: '100.96.9.9' }] }), '--preview'],
    ['route', 'list'],
  ])
    t.equal((await viewer.cli(...read)).code, 0, `read-only may: meshp ${read.join(' ')}`);
  const before = await auditOf(root.ok);
  for (const change of [
    ['policy', 'set', writeJson(dir, 'p2.json', { rules: [] }), '--yes'],
    ['token', 'create'],
    ['network', 'create', 'lab'],
    ['admin', 'create', 'sneaky'],
    ['admin', 'revoke', 'ops', '--yes'],
    ['dns', 'set', join(dir, 'dns.json'), '--yes'],
  ]) {
    const r = await viewer.cli(...change);
    t.match(r.err, /MESHP_FORBIDDEN: the admin credential viewer is read-only/, `read-only is refused: meshp ${change.join(' ')}`);
  }
  t.same(await auditOf(root.ok), before, 'nothing a read-only call asked was changed or recorded');
  t.match(JSON.parse(await root.ok('policy', 'get', '--json')), { rules: [{ from: 'web', to: 'db' }] }, 'the policy in force is the one ops set');
  t.notOk(
    JSON.parse(await root.ok('admin', 'list', '--json')).admins.some((x: { name: string }) => x.name === 'sneaky'),
    'no credential was made',
  );
  t.ok(
    ctl.proc.lines.some((l) => l.msg === 'admin call refused' && l.code === 'MESHP_FORBIDDEN' && l.method === 'setPolicy'),
    'a refusal is logged with its code',
  );

  // Two admins distinguished in the audit log.
  await ops.ok('token', 'create', '--tag', 'web');
  const entries = await auditOf(root.ok);
  t.same(
    entries.map((e) => [e.actor, e.method]),
    [
      ['admin', 'createAdmin'],
      ['admin', 'createAdmin'],
      ['ops', 'setPolicy'],
      ['ops', 'createToken'],
    ],
    'each change with the credential that made it',
  );
  t.match(entries[1]!.summary, 'admin credential viewer created (role read-only)');
  t.match(await root.ok('admin', 'list'), /ops\s+admin\s+\S+\s+in force[\s\S]*viewer\s+read-only\s+\S+\s+in force/, 'admin list: the table');

  // A restart: the credentials are in the store.
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;
  ctl = await startController(t, state, [], ctl.address);
  t.equal((await viewer.cli('node', 'list')).code, 0, 'a named credential holds over a restart');

  // Revoked: refused at its next call; revoking it again changes nothing; a name stays taken.
  t.match(await root.ok('admin', 'revoke', 'ops', '--preview'), /would revoke admin credential ops \(admin/, '--preview says, changes nothing');
  t.equal((await ops.cli('node', 'list')).code, 0, 'still in force after the preview');
  await root.ok('admin', 'revoke', 'ops', '--yes');
  const refused = await ops.cli('node', 'list');
  t.match(refused.err, /MESHP_AUTH_FAILED: the admin credential ops was revoked at/, 'a revoked credential is refused at its next call');
  t.match(await root.ok('admin', 'revoke', 'ops', '--preview'), /revoked at .* already/, 'revoked already: said');
  t.match((await root.cli('admin', 'revoke', 'ghost', '--yes')).err, /MESHP_NOT_FOUND/, 'revoking a name that is none: not found');
  t.match((await root.cli('admin', 'create', 'ops')).err, /MESHP_NAME_TAKEN/, "a revoked credential's name is not given again");
  const revoked = JSON.parse(await viewer.ok('admin', 'list', '--json')) as { admins: { name: string; revokedAt: string | null }[] };
  t.ok(revoked.admins.find((x) => x.name === 'ops')?.revokedAt, 'admin list shows it revoked');
  t.equal((await auditOf(root.ok)).at(-1)!.summary, 'admin credential ops revoked', 'the revocation is in the audit log');
  t.ok(existsSync(opsFile), 'the file is the operator’s: left where it was');
});

const missing = postgresMissing();

t.test(
  'on PostgreSQL, a credential made on one replica works on the other, and its revocation holds there at once',
  { skip: missing ? `needs a PostgreSQL cluster of its own: ${missing}` : false },
  async (t) => {
    const cluster = startPostgres(t);
    const url = await cluster.createDb('meshp');
    const dir = workdir(t, 'admins-pg');
    const a = await startController(t, join(dir, 'a'), ['--store', url]);
    replicaState(join(dir, 'a'), join(dir, 'b'));
    const b = await startController(t, join(dir, 'b'), ['--store', url]);
    const onA = cliOf(() => a);
    const file = join(dir, 'ops.credential');
    const viewerFile = join(dir, 'viewer.credential');
    await onA.ok('admin', 'create', 'ops', '--out', file);
    await onA.ok('admin', 'create', 'viewer', '--role', 'read-only', '--out', viewerFile);
    const opsOnB = cliOf(() => b, file);
    await opsOnB.ok('policy', 'set', writeJson(dir, 'p.json', { rules: [{ from: 'x', to: 'y' }] }), '--yes');
    t.match((await cliOf(() => b, viewerFile).cli('network', 'create', 'lab')).err, /MESHP_FORBIDDEN/, 'the role holds on the other replica');
    const entries = await auditOf(cliOf(() => b).ok);
    t.same(
      entries.map((e) => [e.actor, e.method]),
      [
        ['admin', 'createAdmin'],
        ['admin', 'createAdmin'],
        ['ops', 'setPolicy'],
      ],
      'one audit log: the change made through B by ops',
    );
    await onA.ok('admin', 'revoke', 'ops', '--yes');
    t.match(
      (await opsOnB.cli('node', 'list')).err,
      /MESHP_AUTH_FAILED: the admin credential ops was revoked/,
      'revoked through A: refused by B at its next call',
    );
    const rows = await cluster.query<{ name: string; role: string; revoked: boolean }>(
      'meshp',
      'SELECT name, role, revoked_at IS NOT NULL AS revoked FROM admin_credentials ORDER BY name',
    );
    t.same(
      rows,
      [
        { name: 'ops', role: 'admin', revoked: true },
        { name: 'viewer', role: 'read-only', revoked: false },
      ],
      'the rows are in the database (by hash; no secret)',
    );
    const cols = await cluster.query<{ column_name: string }>(
      'meshp',
      "SELECT column_name FROM information_schema.columns WHERE table_name = 'admin_credentials'",
    );
    t.notOk(
      cols.some((c) => c.column_name === 'secret'),
      'no secret column',
    );
  },
);

/**
 * `meshp route list | set | remove` (issue 26) against a real controller and two real agents on
 * 127.0.0.1: a group is previewed (naming the nodes it changes, changing nothing), refused off a
 * terminal without --yes, set, read back with its primary and users, refused by the CLI and by the
 * controller when not valid, recorded in the audit log, and removed; the agent that may use it holds it.
 * A node's advertised prefixes (`meshp agent --advertise-route`) serve nothing until `route approve`.
 */
import t from 'tap';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { AdminClient } from '@meshp/transport-grpc';
import { createToken, meshpAsync, startAgent, startController, waitUntil, workdir, writeJson } from '../helpers/grpc-procs.js';

const dir = workdir(t, 'route-cli');
const ctl = await startController(t, join(dir, 'ctl'));
const cli = (...args: string[]) => meshpAsync(...args, '--state', ctl.state, '--controller', ctl.address);
const cred = readAdminCredential(join(ctl.state, ADMIN_CREDENTIAL_FILE));
const admin = await AdminClient.connect({ address: ctl.address, fingerprint: cred.fingerprint, credential: cred.secret });
t.teardown(() => admin.close());
const r1 = startAgent(t, dir, 'r1', ctl.address, createToken(ctl, '--adopted', '--tag', 'router'), [
  '--advertise-route',
  '10.50.0.0/16',
  '--advertise-route',
  'fd00:50::/64',
]);
const a = startAgent(t, dir, 'a', ctl.address, createToken(ctl, '--adopted', '--tag', 'user'));
await Promise.all([r1, a].map((x) => x.proc.waitFor((l) => l.msg === 'reconciled', 60_000)));
t.equal((await cli('policy', 'set', writeJson(dir, 'p.json', { rules: [{ from: 'user', to: 'route:lan', ports: ['80/tcp'] }] }), '--yes')).code, 0);
const version = async () => Number((await admin.call('listNodes', { network: 'default' })).nodes[0]!.stateVersion);
const set = ['route', 'set', 'lan', '--prefix', '192.168.77.0/24', '--via', 'r1'];

t.test('route set: previewed with the nodes it changes, refused unconfirmed, then set and read back', async (t) => {
  const before = await version();
  const [preview, unconfirmed] = await Promise.all([cli(...set, '--preview', '--json'), cli(...set)]);
  t.equal(preview.code, 0, preview.err);
  t.same(JSON.parse(preview.out).changedNodes, ['a', 'r1'], 'the preview names the user and the router');
  // r1 runs no tunnel here: its forwarding is not reported (forwarding.test.ts and route-forwarding.test.ts say the rest).
  t.match(JSON.parse(preview.out).forwarding, [{ node: 'r1', change: /forwarding not reported/ }], "the preview says the router's forwarding");
  t.equal(unconfirmed.code, 1);
  t.match(unconfirmed.err, /^MESHP_CONFIRM_NEEDED/);
  t.equal(await version(), before, 'neither changed anything');

  const done = await cli(...set, '--yes');
  t.equal(done.code, 0, done.err);
  t.match(done.out, /route group lan: 192\.168\.77\.0\/24 via r1 set \(state version \d+\): changes 2 node\(s\): a, r1/);
  const list = await cli('route', 'list', '--json');
  t.same(JSON.parse(list.out).groups, [
    { name: 'lan', prefixes: ['192.168.77.0/24'], via: ['r1'], masquerade: true, primary: 'r1', users: ['a'], missingVia: [], exit: false },
  ]);
  const table = await cli('route', 'list');
  t.match(table.out, /GROUP\s+PREFIXES\s+VIA\s+MASQUERADE\s+PRIMARY\s+USERS\nlan\s+192\.168\.77\.0\/24\s+r1\s+yes\s+r1\s+a/);
  // The user's agent holds the group in its view (its state folder's store is SQLite: read through its status instead).
  await waitUntil('a applied the group', async () => {
    const s = await admin.call('showNode', { network: 'default', node: 'a' });
    return Number(s.node?.gap ?? 1) === 0 && Number(s.node?.appliedVersion ?? 0) > before;
  });
  const audit = await cli('audit', '--json');
  t.match(audit.out, /route group lan set: 192\.168\.77\.0\/24 via r1/, 'the change is in the audit log');
  t.notMatch(audit.out, /preview/, 'the preview is not');
});

t.test('invalid groups are refused with a coded error by the CLI and by the controller; nothing is stored', async (t) => {
  const before = await version();
  const [hostBits, v6bad, notMember, exit] = await Promise.all([
    cli('route', 'set', 'x', '--prefix', '10.1.0.1/24', '--via', 'r1', '--yes'),
    cli('route', 'set', 'x', '--prefix', 'fd00::zz/64', '--via', 'r1', '--yes'),
    cli('route', 'set', 'x', '--prefix', '10.1.0.0/24', '--via', 'nobody', '--yes'),
    cli('route', 'set', 'x', '--prefix', '0.0.0.0/0', '--prefix', '10.1.0.0/24', '--via', 'r1', '--yes', '--json'),
  ]);
  t.match(hostBits.err, /^MESHP_ROUTE_INVALID: route group: prefixes\[0\]: 10\.1\.0\.1\/24 has host bits set: the prefix is 10\.1\.0\.0\/24/);
  t.match(v6bad.err, /^MESHP_ROUTE_INVALID: .*not a prefix/);
  t.match(notMember.err, /^MESHP_NOT_FOUND: no node nobody in default/);
  t.match(JSON.parse(exit.err), {
    code: 'MESHP_ROUTE_INVALID',
    message: /0\.0\.0\.0\/0 is a default route: an exit node's group holds only 0\.0\.0\.0\/0 and ::\/0/,
  });
  await t.rejects(
    admin.call('setRouteGroup', {
      network: 'default',
      group: { name: 'x', prefixes: ['192.168.77.128/25'], viaPeers: ['r1'], noMasquerade: false },
      preview: false,
    }),
    {
      code: 'MESHP_ROUTE_INVALID',
      message: /overlaps a prefix of route group lan/,
    },
  );
  await t.rejects(
    admin.call('setRouteGroup', {
      network: 'default',
      group: { name: '../x', prefixes: ['10.9.0.0/16'], viaPeers: ['r1'], noMasquerade: false },
      preview: false,
    }),
    {
      code: 'MESHP_ROUTE_INVALID',
    },
  );
  t.equal(await version(), before, 'nothing was stored');
});

t.test('route remove: previewed, then removed; removing it again is not found', async (t) => {
  const preview = await cli('route', 'remove', 'lan', '--preview');
  t.match(preview.out, /would remove route group lan: changes 2 node\(s\): a, r1/);
  t.equal((await cli('route', 'remove', 'lan', '--yes')).code, 0);
  t.match((await cli('route', 'list')).out, /^no route groups\n/, 'no group (the advertised prefixes follow)');
  const again = await cli('route', 'remove', 'lan', '--yes');
  t.equal(again.code, 1);
  t.match(again.err, /^MESHP_NOT_FOUND: no route group lan in default/);
});

t.test('route approve: advertised prefixes serve nothing until approved; approved, the node is a via node of the group', async (t) => {
  type Listed = { groups: { name: string; prefixes: string[]; via: string[] }[]; advertised: { node: string; prefix: string; group: string }[] };
  const listed = async () => JSON.parse((await cli('route', 'list', '--json')).out) as Listed;
  await waitUntil('r1 advertised its routes', async () => (await listed()).advertised.length === 2);
  t.same(
    (await listed()).advertised,
    [
      { node: 'r1', prefix: '10.50.0.0/16', group: '' },
      { node: 'r1', prefix: 'fd00:50::/64', group: '' },
    ],
    'both advertised, neither approved',
  );
  t.same((await listed()).groups, [], 'advertised alone, they are no group');
  t.match((await cli('route', 'list')).out, /ADVERTISED BY\s+PREFIX\s+STATE\nr1\s+10\.50\.0\.0\/16\s+not approved: serves nothing/);

  const before = await version();
  const preview = await cli('route', 'approve', 'r1', '--group', 'lab', '--prefix', '10.50.0.0/16', '--preview', '--json');
  t.same(JSON.parse(preview.out).changedNodes, ['r1'], 'no policy lets anyone use lab yet: only the router changes');
  const unconfirmed = await cli('route', 'approve', 'r1', '--group', 'lab', '--prefix', '10.50.0.0/16');
  t.match(unconfirmed.err, /^MESHP_CONFIRM_NEEDED/);
  const notAdvertised = await cli('route', 'approve', 'r1', '--group', 'lab', '--prefix', '10.60.0.0/16', '--yes');
  t.match(notAdvertised.err, /^MESHP_ROUTE_INVALID: r1 does not advertise 10\.60\.0\.0\/16/);
  const nothing = await cli('route', 'approve', 'a', '--group', 'lab', '--yes');
  t.match(nothing.err, /^MESHP_ROUTE_INVALID: a advertises no route/);
  t.equal(await version(), before, 'nothing changed');

  const done = await cli('route', 'approve', 'r1', '--group', 'lab', '--prefix', '10.50.0.0/16', '--yes');
  t.equal(done.code, 0, done.err);
  t.match(done.out, /approved 10\.50\.0\.0\/16 of r1 into route group lab/);
  const after = await listed();
  t.same(
    after.groups.map((g) => [g.name, g.prefixes, g.via]),
    [['lab', ['10.50.0.0/16'], ['r1']]],
  );
  t.same(
    after.advertised,
    [
      { node: 'r1', prefix: '10.50.0.0/16', group: 'lab' },
      { node: 'r1', prefix: 'fd00:50::/64', group: '' },
    ],
    'the approved one is served by lab, the other still serves nothing',
  );
  // Every prefix the node advertises, into the same group: the v6 one joins it.
  t.equal((await cli('route', 'approve', 'r1', '--group', 'lab', '--yes')).code, 0);
  t.same((await listed()).groups[0]?.prefixes, ['10.50.0.0/16', 'fd00:50::/64']);
  t.match((await cli('audit', '--json')).out, /route approve 10\.50\.0\.0\/16 of r1 into group lab/);
});

t.test('an agent advertising a prefix with host bits set is refused before it starts', async (t) => {
  const bad = await meshpAsync(
    'agent',
    '--state',
    join(dir, 'bad'),
    '--controller',
    ctl.address,
    '--firewall',
    'none',
    '--root',
    join(dir, 'bad-root'),
    '--advertise-route',
    '10.50.0.1/16',
  );
  t.equal(bad.code, 1);
  t.match(bad.err, /^MESHP_ROUTE_INVALID: advertised routes: \[0\]: 10\.50\.0\.1\/16 has host bits set/);
});

t.test(
  'an exit node: route set --exit, used by a node only once it opts in and its policy allows it; node exit-node previewed, audited, said by node show and /metrics',
  async (t) => {
    const preview = await cli('route', 'set', 'out', '--exit', '--via', 'r1', '--preview', '--json');
    t.equal(preview.code, 0, preview.err);
    t.same(JSON.parse(preview.out).group.prefixes, ['0.0.0.0/0', '::/0'], '--exit: the default routes');
    t.same(JSON.parse(preview.out).changedNodes, ['r1'], 'nobody opted in: only the exit node changes');
    const mixed = await cli('route', 'set', 'x', '--exit', '--prefix', '10.0.0.0/8', '--via', 'r1', '--preview');
    t.match(mixed.err, /^MESHP_ROUTE_INVALID: route group x: --exit routes 0\.0\.0\.0\/0 and ::\/0/, 'the CLI refuses an exit group with another prefix');
    t.equal((await cli('route', 'set', 'out', '--exit', '--via', 'r1', '--yes')).code, 0);
    t.equal((await cli('route', 'set', 'lan3', '--prefix', '10.80.0.0/16', '--via', 'r1', '--yes')).code, 0);
    t.match((await cli('node', 'exit-node', 'a', 'lan3', '--preview')).err, /^MESHP_ROUTE_INVALID: route group lan3 is not an exit node/);
    t.equal((await cli('route', 'remove', 'lan3', '--yes')).code, 0);
    const shown = async () =>
      (
        JSON.parse((await cli('node', 'show', 'a', '--json')).out) as {
          node: { exitNode: string | null; exitNodeReason: string | null; exitNodePrimary: string | null };
        }
      ).node;
    // Not allowed yet: the admin's setting is kept, the node uses none, and says why.
    t.equal((await cli('node', 'exit-node', 'a', 'out', '--yes')).code, 0);
    t.match(await shown(), { exitNode: null, exitNodeReason: 'not allowed' }, 'no rule to route:out: not used');
    const rules = [
      { from: 'user', to: 'route:lan', ports: ['80/tcp'] },
      { from: 'user', to: 'route:out' },
    ];
    t.equal((await cli('policy', 'set', writeJson(dir, 'p-out.json', { rules }), '--yes')).code, 0);
    t.match(await shown(), { exitNode: 'out', exitNodeReason: 'admin', exitNodePrimary: 'r1' }, 'allowed: a uses out');
    t.match((await cli('node', 'show', 'a')).out, /^exit node: out \(admin; primary r1\)$/m, 'node show says it');
    t.match((await cli('doctor', 'a')).out, /^exit node: out \(admin; primary r1\)$/m, 'and doctor');
    const metrics = await (await fetch(`http://${ctl.metrics}/metrics`)).text();
    t.match(metrics, /^meshp_node_exit_node\{network="default",node="a",exit_node="out",primary="r1"\} 1$/m, 'and /metrics');
    const off = await cli('node', 'exit-node', 'a', '--off', '--preview', '--json');
    t.same(JSON.parse(off.out), { preview: true, changedNodes: ['a', 'r1'], exitNode: '', reason: 'off' }, '--off previewed: a and its exit node change');
    t.equal((await cli('node', 'exit-node', 'a', '--off', '--yes')).code, 0);
    t.match(await shown(), { exitNode: null, exitNodeReason: 'off' });
    t.match((await cli('node', 'exit-node', 'a', 'out', '--off')).err, /^MESHP_USAGE/, 'a name and --off together: a usage error');
    const audit = (await cli('audit', '--json')).out;
    t.match(audit, /exit node of a: out/, 'the settings are in the audit log');
    t.match(audit, /exit node of a: off/);
    t.equal((await cli('route', 'remove', 'out', '--yes')).code, 0);
    t.equal((await cli('policy', 'set', writeJson(dir, 'p-back.json', { rules: [rules[0]] }), '--yes')).code, 0);
  },
);

t.test("failover: the primary's agent gone, the next via node that is up is primary, node show and /metrics say so", async (t) => {
  const metric = async (name: string) =>
    Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(await (await fetch(`http://${ctl.metrics}/metrics`)).text())?.[1] ?? NaN);
  const failoversBefore = await metric('meshp_route_failovers_total');
  t.equal((await cli('route', 'set', 'two', '--prefix', '10.70.0.0/16', '--via', 'r1', '--via', 'a', '--yes')).code, 0);
  const show = async (node: string) =>
    JSON.parse((await cli('node', 'show', node, '--json')).out) as { routes: { group: string; role: string; primary: string | null }[] };
  t.same(
    (await show('a')).routes.find((x) => x.group === 'two'),
    { group: 'two', role: 'serves', prefixes: ['10.70.0.0/16'], primary: 'r1' },
    'node show: a serves two, r1 primary',
  );
  r1.proc.kill('SIGKILL');
  await waitUntil('a primary of two', async () => (await show('a')).routes.find((x) => x.group === 'two')?.primary === 'a');
  t.equal(await metric('meshp_route_failovers_total'), failoversBefore + 1, 'one failover counted');
  t.ok((await metric('meshp_route_last_failover_timestamp_seconds')) > Date.now() / 1000 - 120, 'and when');
  const list = JSON.parse((await cli('route', 'list', '--json')).out) as { groups: { name: string; primary: string }[] };
  t.equal(list.groups.find((g) => g.name === 'two')?.primary, 'a');
  const doctor = await cli('doctor', 'a');
  t.match(doctor.out, /^route two: serves 10\.70\.0\.0\/16; primary a \(this node\)$/m, 'doctor says it too');
});

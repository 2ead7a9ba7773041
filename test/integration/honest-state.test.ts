/**
 * What meshp reports is what its agents did (issue 11), with a real controller and real agents on
 * 127.0.0.1 (no firewall plugin: nothing of this machine is touched; files under each agent's own
 * root). Every case is read three ways: `node list --json`, `doctor --json`, and `/metrics` parsed
 * by a Prometheus parser we did not write.
 */
import t from 'tap';
import { join } from 'node:path';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { AdminClient } from '@meshp/transport-grpc';
import { spawnSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import { Proc, meshpAsync, startController, workdir, writeJson } from '../helpers/grpc-procs.js';
import { scrape } from '../helpers/prom.js';

interface NodeJson {
  name: string;
  mode: string;
  requestedMode: string;
  status: string;
  statusDetail: string;
  connected: boolean;
  lastSeen: string | null;
  gap: number;
  refusedResources: number;
  reconcile: { result: string; code: string; message: string } | null;
  transition: { state: string; mode: string; version: number; code: string } | null;
  lifecycle: { state: string } | null;
}

const dir = workdir(t, 'honest');
const ctl = await startController(t, join(dir, 'ctl'));
const admin = ['--state', ctl.state, '--controller', ctl.address];
/** The CLI as a process, not waited on synchronously: the views of one case are read side by side. */
const cli = (...args: string[]) => meshpAsync(...args, ...admin);
const json = async <T>(...args: string[]): Promise<T> => {
  const r = await cli(...args, '--json');
  if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
  return JSON.parse(r.out) as T;
};
const list = async () => (await json<{ nodes: NodeJson[] }>('node', 'list')).nodes;
const nodeOf = async (name: string) => (await list()).find((n) => n.name === name);
// Waiting polls the Admin service in-process (a CLI run per poll costs a second on a busy machine);
// what is asserted is read through the CLI.
const cred = readAdminCredential(join(ctl.state, ADMIN_CREDENTIAL_FILE));
const adminClient = await AdminClient.connect({ address: ctl.address, fingerprint: cred.fingerprint, credential: cred.secret });
t.teardown(() => adminClient.close());
type Wire = {
  name: string;
  status: string;
  refusedResources: number;
  stateVersion: number;
  assignedModules: string[];
  reconcile?: { result: string; code: string };
};
async function until(what: string, name: string, pred: (n: Wire) => boolean): Promise<void> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const nodes = (await adminClient.call('listNodes', { network: 'default' })).nodes as unknown as Wire[];
    const n = nodes.find((x) => x.name === name);
    if (n && pred(n)) return;
    if (Date.now() > deadline) throw new Error(`timed out: ${what} (last: ${JSON.stringify(n)})`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

// Tokens come from the Admin service in-process: the CLI's token command is input-contract's.
const token = async () => (await adminClient.call('createToken', { network: 'default', mode: 1, ttlSeconds: 600, tags: [] })).token;
// n1's root holds what its agent must refuse (a FIFO, a symlink, a symlinked folder leading out of
// the root), made before it starts; nothing declares them until a case assigns the module that does.
const n1Root = join(dir, 'n1', 'root');
mkdirSync(join(n1Root, 'etc/r'), { recursive: true });
// No assertion at the top level: tap would end the file's test on it, before the subtests.
if (spawnSync('mkfifo', [join(n1Root, 'etc/r/fifo.conf')]).status !== 0) throw new Error('mkfifo failed');
symlinkSync('fifo.conf', join(n1Root, 'etc/r/link.conf'));
symlinkSync('/tmp', join(n1Root, 'etc/out'));
// Two agents, both enrolled adopted, no firewall plugin.
// --interval 30: every case here is driven by a delta, which the agent reconciles at once; a timer
// reconcile each second would only load the machine the CLI runs on.
const agent = (name: string, extra: string[] = []) =>
  new Proc(t, [
    'agent',
    '--state',
    join(dir, name, 'state'),
    '--controller',
    ctl.address,
    '--name',
    name,
    '--root',
    join(dir, name, 'root'),
    '--firewall',
    'none',
    '--docker-socket',
    join(dir, name, 'absent.sock'),
    '--interval',
    '30',
    ...extra,
  ]);
const a1 = agent('n1', ['--token', await token()]);
// n2 serves its own /metrics too (meshp agent --metrics-listen).
mkdirSync(join(dir, 'n2', 'root'), { recursive: true });
const a2 = agent('n2', ['--token', await token(), '--metrics-listen', '127.0.0.1:0']);
const agentMetrics = String((await a2.waitFor((l) => l.msg === 'agent metrics serving', 60_000)).metrics);
await until('n1 reported', 'n1', (n) => n.status === 'ok');
await until('n2 reported', 'n2', (n) => n.status === 'ok');

t.test('a node that reports is ok, adopted, connected, with its last reconcile ok: the same in every view', async (t) => {
  const [n, d, human, m] = await Promise.all([
    nodeOf('n1'),
    json<{ node: NodeJson; verdict: string }>('doctor', 'n1'),
    cli('node', 'list'),
    scrape(ctl.metrics),
  ]);
  t.match(n, {
    mode: 'adopted',
    requestedMode: 'adopted',
    status: 'ok',
    connected: true,
    gap: 0,
    refusedResources: 0,
    reconcile: { result: 'ok' },
    transition: { state: 'none' },
  });
  t.ok(n!.lastSeen, 'last seen is set');
  t.match(d.node, { mode: 'adopted', status: 'ok' });
  t.match(d.verdict, /^in sync/);
  t.equal(m.value('meshp_node_connected', { node: 'n1' }), 1);
  t.equal(m.value('meshp_node_status', { node: 'n1', status: 'ok' }), 1);
  t.equal(m.value('meshp_node_mode', { node: 'n1', mode: 'adopted' }), 1);
  t.equal(m.value('meshp_convergence_gap', { node: 'n1' }), 0);
  t.equal(m.value('meshp_node_refused_resources', { node: 'n1' }), 0);
  t.ok((m.value('meshp_node_last_report_timestamp_seconds', { node: 'n1' }) ?? 0) > 1e9, 'a last report time');
  t.notOk(
    m.labels('meshp_convergence_gap').some((l) => 'mode' in l),
    'the gap has no mode label',
  );
  t.ok(m.value('meshp_build_info', {}) === 1, 'build info');
  t.ok(m.value('process_cpu_user_seconds_total') !== undefined, 'process metrics');
  t.match(human.out, /^NODE\s+STATUS\s+MODE/m);
  t.match(human.out, /^n1\s+ok\s+ADOPTED/m);
});

t.test('a node no firewall plugin can hold a derived filter on is not converged: the preview and the flip say why, at once', async (t) => {
  const preview = await cli('node', 'converge', 'n2', '--preview');
  t.equal(preview.code, 0, preview.err);
  t.match(preview.out, /REFUSED: node n2 has no firewall plugin that can hold the derived filter/);
  const r = await cli('node', 'converge', 'n2', '--yes', '--timeout', '180');
  t.equal(r.code, 1, 'refused by the controller, before anything is recorded');
  t.match(r.err, /^MESHP_PROVIDER_MISSING: node n2 has no firewall plugin .*every port it serves would stay open/);
  t.notMatch(r.out, /requested:/, 'nothing was asked of the agent');
  const [n, m, own] = await Promise.all([nodeOf('n2'), scrape(ctl.metrics), scrape(agentMetrics)]);
  t.match(n, { mode: 'adopted', requestedMode: 'adopted', status: 'ok' }, 'still adopted, as its agent reports');
  t.equal(m.value('meshp_node_mode', { node: 'n2', mode: 'adopted' }), 1);
  t.equal(own.value('meshp_agent_connected'), 1, "the agent's own /metrics: connected");
  t.equal(own.value('meshp_agent_mode', { mode: 'adopted' }), 1, '... adopted');
  t.equal(own.value('meshp_agent_reconcile_refused'), 0);
  t.ok((own.value('meshp_agent_applied_version') ?? 0) > 0, '... with the version it applied');
  t.equal(own.value('meshp_build_info', {}), 1);
});

t.test('two modules that clash on one node are refused by the controller, with a code, and nothing is stored', async (t) => {
  // Defined together they are refused (catalogue add checks the modules as one node's declaration); one by one each passes.
  const together = await cli(
    'catalogue',
    'add',
    writeJson(dir, 'clash.json', {
      modules: [
        { name: 'c1', files: [{ path: '/etc/clash.conf', content: 'a' }] },
        { name: 'c2', files: [{ path: '/etc/clash.conf', content: 'b' }] },
      ],
    }),
    '--yes',
  );
  t.match(together.err, /^MESHP_DECLARATION_INVALID: .*declared by both/);
  for (const name of ['c1', 'c2'])
    await adminClient.call('addCatalogue', {
      network: 'default',
      modules: [{ name, files: [{ path: '/etc/clash.conf', content: name }], containers: [], openings: [] }] as never,
    });
  await adminClient.call('assignModule', { network: 'default', node: 'n1', module: 'c1' });
  await until('n1 applied c1', 'n1', (x) => x.status === 'ok' && x.assignedModules.includes('c1'));
  const before = (await adminClient.call('listNodes', { network: 'default' })).nodes.find((x) => x.name === 'n1')!;
  const r = await cli('module', 'assign', 'n1', 'c2', '--yes');
  t.equal(r.code, 1);
  t.match(r.err, /^MESHP_MODULES_CLASH: node n1: file:\/etc\/clash\.conf is declared by both module c1 and module c2/);
  // What the controller stored, read in this process: the refusal above is the CLI's to show, the state is not.
  const after = (await adminClient.call('listNodes', { network: 'default' })).nodes.find((x) => x.name === 'n1')!;
  t.same(after.assignedModules, ['c1'], 'the assignment was not stored');
  t.equal(Number(after.stateVersion), Number(before.stateVersion), 'no new version');
  t.match({ status: after.status, gap: Number(after.gap) }, { status: 'ok', gap: 0 }, 'the node never saw the clash');
  await adminClient.call('unassignModule', { network: 'default', node: 'n1', module: 'c1' });
});

t.test('refused resources are counted, with their codes, in every view; gap 0 hides none of them', async (t) => {
  // A FIFO and a symlink where the module declares files: each refused on its own, the third file written.
  await adminClient.call('addCatalogue', {
    network: 'default',
    modules: [{ name: 'r', files: ['fifo', 'link', 'ok'].map((f) => ({ path: `/etc/r/${f}.conf`, content: f })), containers: [], openings: [] }] as never,
  });
  await adminClient.call('assignModule', { network: 'default', node: 'n1', module: 'r' });
  await until('n1 reports 2 refused resources', 'n1', (x) => x.refusedResources === 2);
  const [n, show, d, human, m] = await Promise.all([
    nodeOf('n1'),
    json<{ resources: { key: string; state: string; reason?: string }[] }>('node', 'show', 'n1'),
    json<{ node: NodeJson; verdict: string }>('doctor', 'n1'),
    cli('node', 'list'),
    scrape(ctl.metrics),
  ]);
  t.match(n, { gap: 0, status: 'refusing', refusedResources: 2, reconcile: { result: 'refused', code: 'MESHP_REFUSED', message: '2 resource(s) refused' } });
  t.match(n!.statusDetail, /MESHP_FILE_NOT_REGULAR 1, MESHP_PATH_SYMLINK 1/, 'the status names the codes');
  const by = Object.fromEntries(show.resources.map((x) => [x.key, x]));
  t.match(by['file:/etc/r/fifo.conf'], { state: 'refused', reason: /^MESHP_FILE_NOT_REGULAR: .*FIFO/ });
  t.match(by['file:/etc/r/link.conf'], { state: 'refused', reason: /^MESHP_PATH_SYMLINK: / });
  t.match(by['file:/etc/r/ok.conf'], { state: /^(created|owned)$/ }, 'the declared file beside them is written');
  t.match(d.node, { refusedResources: 2, status: 'refusing' });
  t.match(d.verdict, /^refusing: .*2 resource\(s\) refused.*MESHP_FILE_NOT_REGULAR/, 'doctor: refusing, never in sync');
  t.match(human.out, /^n1\s+REFUSING\s+ADOPTED(\s+\S+){6}\s+2\s/m, 'node list: REFUSING, with 2 in the refused column');
  t.equal(m.value('meshp_node_refused_resources', { node: 'n1' }), 2);
  t.equal(m.value('meshp_node_refused_resources_by_code', { node: 'n1', code: 'MESHP_FILE_NOT_REGULAR' }), 1);
  t.equal(m.value('meshp_node_refused_resources_by_code', { node: 'n1', code: 'MESHP_PATH_SYMLINK' }), 1);
  t.equal(m.value('meshp_convergence_gap', { node: 'n1' }), 0);
  t.equal(m.value('meshp_node_status', { node: 'n1', status: 'refusing' }), 1);
  await adminClient.call('unassignModule', { network: 'default', node: 'n1', module: 'r' });
});

t.test('a reconcile the agent refuses as a whole stands out: refusing, with its code, in every view', async (t) => {
  // The controller cannot know it: /etc/out in n1's root is a symlink leading out of the root, so the agent refuses the whole apply.
  await adminClient.call('addCatalogue', {
    network: 'default',
    modules: [{ name: 'out', files: [{ path: '/etc/out/x.conf', content: 'x' }], containers: [], openings: [] }] as never,
  });
  await adminClient.call('assignModule', { network: 'default', node: 'n1', module: 'out' });
  await until('n1 reports the refusal', 'n1', (x) => x.reconcile?.code === 'MESHP_PATH_ESCAPES_ROOT');
  const [n, d, human, m] = await Promise.all([
    nodeOf('n1'),
    json<{ node: NodeJson; verdict: string }>('doctor', 'n1'),
    cli('node', 'list'),
    scrape(ctl.metrics),
  ]);
  t.match(n, { gap: 0, status: 'refusing', reconcile: { result: 'refused', code: 'MESHP_PATH_ESCAPES_ROOT' } });
  t.match(n!.statusDetail, /MESHP_PATH_ESCAPES_ROOT/);
  t.notMatch(d.verdict, /^(converged|in sync)/, 'doctor never says converged over a refusal');
  t.match(d.verdict, /^refusing: MESHP_PATH_ESCAPES_ROOT/);
  t.equal(m.value('meshp_node_reconcile_refused', { node: 'n1' }), 1);
  t.equal(m.value('meshp_node_status', { node: 'n1', status: 'refusing' }), 1);
  t.equal(m.value('meshp_convergence_gap', { node: 'n1' }), 0);
  t.match(human.out, /^n1\s+REFUSING/m);
  await adminClient.call('unassignModule', { network: 'default', node: 'n1', module: 'out' });
  await until('n1 is ok again', 'n1', (x) => x.status === 'ok');
});

t.test('a stopped agent is silent: not connected, last seen, in every view', async (t) => {
  a1.kill('SIGTERM');
  await a1.exited;
  await until('n1 is silent', 'n1', (x) => x.status === 'silent');
  const [n, d, human, m] = await Promise.all([
    nodeOf('n1'),
    json<{ node: NodeJson; verdict: string }>('doctor', 'n1'),
    cli('node', 'list'),
    scrape(ctl.metrics),
  ]);
  t.match(n, { connected: false });
  t.ok(n!.lastSeen);
  t.match(d.verdict, /not connected/);
  t.equal(m.value('meshp_node_connected', { node: 'n1' }), 0);
  t.equal(m.value('meshp_node_status', { node: 'n1', status: 'silent' }), 1);
  t.equal(m.value('meshp_connected_agents'), 1);
  t.match(human.out, /^n1\s+SILENT/m);
});

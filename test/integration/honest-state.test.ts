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
import { mkdirSync } from 'node:fs';
import { Proc, createToken, meshp, startAgent, startController, workdir, writeJson } from '../helpers/grpc-procs.js';
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
const cli = (...args: string[]) => meshp(...args, ...admin);
const json = <T>(...args: string[]): T => {
  const r = cli(...args, '--json');
  if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
  return JSON.parse(r.out) as T;
};
const list = () => json<{ nodes: NodeJson[] }>('node', 'list').nodes;
const nodeOf = (name: string) => list().find((n) => n.name === name);
// Waiting polls the Admin service in-process (a CLI run per poll costs a second on a busy machine);
// what is asserted is read through the CLI.
const cred = readAdminCredential(join(ctl.state, ADMIN_CREDENTIAL_FILE));
const adminClient = await AdminClient.connect({ address: ctl.address, fingerprint: cred.fingerprint, credential: cred.secret });
t.teardown(() => adminClient.close());
type Wire = { name: string; status: string; refusedResources: number };
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

// Two agents, both enrolled adopted, no firewall plugin.
const a1 = startAgent(t, dir, 'n1', ctl.address, createToken(ctl, '--adopted'));
// n2 serves its own /metrics too (meshp agent --metrics-listen).
const n2Root = join(dir, 'n2', 'root');
mkdirSync(n2Root, { recursive: true });
const a2 = new Proc(t, ['agent', '--state', join(dir, 'n2', 'state'), '--controller', ctl.address, '--name', 'n2', '--root', n2Root, '--firewall', 'none',
  '--docker-socket', join(dir, 'n2', 'absent.sock'), '--interval', '1', '--token', createToken(ctl, '--adopted'), '--metrics-listen', '127.0.0.1:0']);
const agentMetrics = String((await a2.waitFor((l) => l.msg === 'agent metrics serving', 60_000)).metrics);
await until('n1 reported', 'n1', (n) => n.status === 'ok');
await until('n2 reported', 'n2', (n) => n.status === 'ok');

t.test('a node that reports is ok, adopted, connected, with its last reconcile ok: the same in every view', async (t) => {
  const n = nodeOf('n1')!;
  t.match(n, { mode: 'adopted', requestedMode: 'adopted', status: 'ok', connected: true, gap: 0, refusedResources: 0, reconcile: { result: 'ok' }, transition: { state: 'none' } });
  t.ok(n.lastSeen, 'last seen is set');
  const d = json<{ node: NodeJson; verdict: string }>('doctor', 'n1');
  t.match(d.node, { mode: 'adopted', status: 'ok' });
  t.match(d.verdict, /^in sync/);
  const m = await scrape(ctl.metrics);
  t.equal(m.value('meshp_node_connected', { node: 'n1' }), 1);
  t.equal(m.value('meshp_node_status', { node: 'n1', status: 'ok' }), 1);
  t.equal(m.value('meshp_node_mode', { node: 'n1', mode: 'adopted' }), 1);
  t.equal(m.value('meshp_convergence_gap', { node: 'n1' }), 0);
  t.ok((m.value('meshp_node_last_report_timestamp_seconds', { node: 'n1' }) ?? 0) > 1e9, 'a last report time');
  t.notOk(m.labels('meshp_convergence_gap').some((l) => 'mode' in l), 'the gap has no mode label');
  t.ok(m.value('meshp_build_info', {}) === 1, 'build info');
  t.ok(m.value('process_cpu_user_seconds_total') !== undefined, 'process metrics');
  const human = cli('node', 'list');
  t.match(human.out, /^NODE\s+STATUS\s+MODE/m);
  t.match(human.out, /^n1\s+ok\s+ADOPTED/m);
});

t.test('a flip with nothing to flip (no firewall plugin) is answered at once with what is true', async (t) => {
  const preview = cli('node', 'converge', 'n2', '--preview');
  t.equal(preview.code, 0, preview.err);
  t.notMatch(preview.out, /WILL CLOSE/, 'nothing can close on a node with no firewall plugin');
  t.match(preview.out, /nothing to flip/);
  const before = Date.now();
  const r = cli('node', 'converge', 'n2', '--yes', '--timeout', '25');
  t.equal(r.code, 0, r.err);
  t.match(r.out, /node n2 converged, by its agent's report/);
  t.ok(Date.now() - before < 20_000, `answered well before the timeout (${Date.now() - before} ms)`);
  t.match(nodeOf('n2'), { mode: 'converged', requestedMode: 'converged', status: 'ok', transition: { state: 'done', mode: 'converged' } });
  const m = await scrape(ctl.metrics);
  t.equal(m.value('meshp_node_mode', { node: 'n2', mode: 'converged' }), 1);
  const own = await scrape(agentMetrics);
  t.equal(own.value('meshp_agent_connected'), 1, "the agent's own /metrics: connected");
  t.equal(own.value('meshp_agent_mode', { mode: 'converged' }), 1, '... converged');
  t.equal(own.value('meshp_agent_reconcile_refused'), 0);
  t.ok((own.value('meshp_agent_applied_version') ?? 0) > 0, '... with the version it applied');
  t.equal(own.value('meshp_build_info', {}), 1);
});

t.test('a reconcile the agent refuses as a whole stands out: refusing, with its code, in every view', async (t) => {
  // Each module is valid alone; together on one node they declare one file twice: the agent refuses the declaration.
  // Defined together they are refused (catalogue add checks the modules as one node's declaration); one by one each passes.
  const together = cli('catalogue', 'add', writeJson(dir, 'clash.json', { modules: [{ name: 'c1', files: [{ path: '/etc/clash.conf', content: 'a' }] }, { name: 'c2', files: [{ path: '/etc/clash.conf', content: 'b' }] }] }), '--yes');
  t.match(together.err, /^MESHP_DECLARATION_INVALID: .*declared by both/);
  for (const name of ['c1', 'c2']) {
    await adminClient.call('addCatalogue', { network: 'default', modules: [{ name, files: [{ path: '/etc/clash.conf', content: name }], containers: [], openings: [] }] as never });
    await adminClient.call('assignModule', { network: 'default', node: 'n1', module: name });
  }
  await until('n1 reports the refusal', 'n1', (x) => x.status === 'refusing');
  const n = nodeOf('n1')!;
  t.match(n, { gap: 0, reconcile: { result: 'refused', code: 'MESHP_DECLARATION_INVALID' } });
  t.match(n.statusDetail, /MESHP_DECLARATION_INVALID/);
  const d = json<{ node: NodeJson; verdict: string }>('doctor', 'n1');
  t.notMatch(d.verdict, /^converged/, 'doctor never says converged over a refusal');
  t.match(d.verdict, /refus/);
  const m = await scrape(ctl.metrics);
  t.equal(m.value('meshp_node_reconcile_refused', { node: 'n1' }), 1);
  t.equal(m.value('meshp_node_status', { node: 'n1', status: 'refusing' }), 1);
  t.match(cli('node', 'list').out, /^n1\s+REFUSING/m);
  await adminClient.call('unassignModule', { network: 'default', node: 'n1', module: 'c2' });
  await until('n1 is ok again', 'n1', (x) => x.status === 'ok');
});

t.test('a stopped agent is silent: not connected, last seen, in every view', async (t) => {
  a1.proc.kill('SIGTERM');
  await a1.proc.exited;
  await until('n1 is silent', 'n1', (x) => x.status === 'silent');
  const n = nodeOf('n1')!;
  t.match(n, { connected: false });
  t.ok(n.lastSeen);
  const d = json<{ node: NodeJson; verdict: string }>('doctor', 'n1');
  t.match(d.verdict, /not connected/);
  const m = await scrape(ctl.metrics);
  t.equal(m.value('meshp_node_connected', { node: 'n1' }), 0);
  t.equal(m.value('meshp_node_status', { node: 'n1', status: 'silent' }), 1);
  t.equal(m.value('meshp_connected_agents'), 1);
  t.match(cli('node', 'list').out, /^n1\s+SILENT/m);
});

/**
 * Converging a node and returning it, THROUGH THE CONTROLLER, on a real nftables machine: the
 * controller, the agent and the CLI all run inside the lab's server namespace (the controller on
 * its loopback), the client probes from its own namespace. The preview comes from the agent's
 * report; a wrong preview id is refused; the flip loads the derived filter and retires the found
 * firewall with its config on disk; adopting brings the found firewall back.
 */
import t from 'tap';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, lab, reachable } from '../helpers/nft-lab.js';
import { meshpIn, nsCluster } from '../helpers/lifecycle-lab.js';

if (!labAvailable()) {
  t.plan(0, 'needs root for network namespaces');
  process.exit(0);
}

interface NodeJson {
  name: string;
  mode: string;
  gap: number;
  firewall: string;
  stateVersion: number;
  status: string;
  reportedVersion: number;
  convergePreviewId: string | null;
  lifecycle: { state: string; previewId: string; steps: string[]; code: string } | null;
}

const l = await lab(t);
const dir = mkdtempSync(join(tmpdir(), `${l.prefix}-lcr-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const configBefore = readFileSync(l.configFile);
await l.serve(l.server, 8080);
await l.serve(l.server, 9000);

const cluster = await nsCluster(t, l.server, dir);
const cli = (...args: string[]) => meshpIn(l.server, [...args, ...cluster.admin]);
const json = async <T>(...args: string[]): Promise<T> => {
  const r = await cli(...args, '--json');
  if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
  return JSON.parse(r.out) as T;
};
const nodeOf = async (): Promise<NodeJson> => (await json<{ node: NodeJson }>('node', 'show', 'server')).node;
const tables = async () =>
  (JSON.parse(await l.nft(['-j', 'list', 'tables'])).nftables as Record<string, { family: string; name: string }>[])
    .filter((o) => o.table)
    .map((o) => `${o.table!.family} ${o.table!.name}`);

async function until<T>(what: string, fn: () => Promise<T | false | undefined>, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    let last: unknown;
    const v = await fn().catch((e) => void (last = e));
    if (v === undefined || v === false) last ??= 'not yet';
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what} (${String(last ?? '')}); agent: ${JSON.stringify(agent.lines.slice(-8))} ${agent.stderr}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

const token = (await json<{ token: string }>('token', 'create', '--adopted')).token;
// A timer reconcile every 30 s, not every second: each step here is a delta the agent reconciles at
// once, and a report that changes between a preview and its flip (a busybox child named as a
// holder) would make the flip stale for a reason this test does not mean.
const agent = cluster.agent('server', token, l.root, [], 30);
await agent.waitFor((x) => x.msg === 'enrolled');
const catalogue = join(dir, 'web.json');
writeFileSync(catalogue, JSON.stringify({ modules: [{ name: 'web', openings: [{ port: 8080, path: 'incoming', from: [CLIENT_NET] }] }] }));
await json('catalogue', 'add', catalogue, '--yes');
const assigned = await json<{ node: { stateVersion: number } }>('module', 'assign', 'server', 'web', '--yes');
// The agent's own log says when it reconciled that version; the views are read after, once as a rule.
await agent.waitFor((x) => x.msg === 'reconciled' && Number(x.appliedVersion) >= assigned.node.stateVersion, 120_000);
await until('the adopted node reported the current version', async () => {
  const n = await nodeOf();
  return n.gap === 0 && n.reportedVersion >= n.stateVersion && n.lifecycle?.state === 'adopted' && n.firewall === 'nftables' && n;
});

/** Seconds an open port may take to answer on a busy machine (a closed one is probed with the default 1 s). */
const OPEN_WITHIN = 10;
let previewId = '';

t.test('the preview, from the agent report, names the declared port and the one that will close', async (t) => {
  // Both previews at once: the id is a digest of the same report, so the human one names it too.
  const humanPreview = cli('node', 'converge', 'server', '--preview');
  const { node, preview } = await json<{
    node: NodeJson;
    preview: {
      id: string;
      items: { port: number; after: string; declaredBy: string | null; holder: string }[];
      firewall: { kind: string; active: boolean; tables: string[]; configFile?: string };
      take: string[];
    };
  }>('node', 'converge', 'server', '--preview');
  previewId = preview.id;
  t.equal(node.mode, 'adopted');
  const by = Object.fromEntries(preview.items.map((i) => [i.port, i]));
  t.match(by[8080], { declaredBy: 'web', after: 'open', holder: /^busybox \(pid \d+\)$/ });
  t.match(by[9000], { declaredBy: null, after: 'closes' });
  t.match(by[8080], { now: 'open', mentioned: true }, "where the agent's driver says each door is reachable now reaches the controller's preview");
  t.match(by[9000], { now: 'closed', mentioned: false });
  t.match(preview.firewall, { kind: 'nftables', active: true, configFile: l.configFile });
  t.ok(preview.firewall.tables.includes('inet filter'), `the found table is named (${preview.firewall.tables.join(', ')})`);
  t.same(preview.take, ['web']);
  const human = await humanPreview;
  t.equal(human.code, 0, human.err);
  t.match(human.out, /ADOPTED/);
  t.match(human.out, new RegExp(`converge preview ${preview.id}`));
  t.match(human.out, /8080\/tcp\s+socket.*web\s+open\s+stays open from 10\.70\.1\.0\/24/, 'open now through the found firewall, as the agent reported');
  t.match(human.out, /9000\/tcp\s+socket.*closed\s+stays closed/);
  // No probe of 8080 before the flip: busybox forks a child per connection that shares the
  // listening socket, and the facts plugin may name the child as its holder while it lives.
});

t.test('a wrong preview id is refused by the controller, in one line, and nothing changes', async (t) => {
  const r = await cli('node', 'converge', 'server', '--yes', '--preview-id', 'deadbeefdeadbeef');
  t.equal(r.code, 1);
  t.match(r.err, /^MESHP_PREVIEW_STALE: .*deadbeefdeadbeef.*\n$/);
  t.equal(r.err.trim().split('\n').length, 1);
  const [n, now] = await Promise.all([nodeOf(), tables()]);
  t.equal(n.mode, 'adopted');
  t.ok(now.includes('inet filter'));
});

t.test('the flip with the right id: derived filter loaded, found table retired, config on disk, 8080 open, 9000 closed', async (t) => {
  const r = await cli('node', 'converge', 'server', '--yes', '--preview-id', previewId, '--timeout', '60');
  t.equal(r.code, 0, r.err);
  t.match(r.out, /-> taking web/);
  t.match(r.out, /-> loading the derived filter/);
  t.match(r.out, /-> retiring the found nftables firewall/);
  t.match(r.out, new RegExp(`node server converged, by its agent's report \\(preview ${previewId}\\)`));
  // The machine and the views, read side by side.
  const [now, open8080, open9000, { nodes }, show] = await Promise.all([
    tables(),
    reachable(l.client, SERVER_CLIENT, 8080, OPEN_WITHIN),
    reachable(l.client, SERVER_CLIENT, 9000),
    json<{ nodes: NodeJson[] }>('node', 'list'),
    cli('node', 'show', 'server'),
  ]);
  t.ok(
    now.some((x) => /meshp/.test(x)),
    `the derived table is loaded (${now.join(', ')})`,
  );
  t.notOk(now.includes('inet filter'), 'the found table is retired');
  t.same(readFileSync(l.configFile), configBefore, 'the found configuration is byte for byte on disk');
  t.ok(open8080, 'the declared port is open from its range');
  t.notOk(open9000, 'the undeclared port is closed');
  t.match(
    nodes.find((n) => n.name === 'server'),
    { mode: 'converged', convergePreviewId: previewId, lifecycle: { state: 'converged', previewId } },
  );
  t.match(show.out, /server in default: converged/);
  t.match(show.out, new RegExp(`last preview: ${previewId}`));
  t.match(show.out, /opening:.*web/);
  const again = await cli('node', 'converge', 'server', '--yes');
  t.equal(again.code, 1, 'a converged node is not flipped twice');
  t.match(again.err, /^MESHP_LIFECYCLE: /);
});

t.test('meshp node adopt brings the found firewall back and the derived table goes', async (t) => {
  const r = await cli('node', 'adopt', 'server', '--yes', '--timeout', '60');
  t.equal(r.code, 0, r.err);
  t.match(r.out, /-> re-enabling the found nftables firewall/);
  const [now, open8080, open9000, { nodes }, human] = await Promise.all([
    tables(),
    reachable(l.client, SERVER_CLIENT, 8080, OPEN_WITHIN),
    reachable(l.client, SERVER_CLIENT, 9000),
    json<{ nodes: NodeJson[] }>('node', 'list'),
    cli('node', 'list'),
  ]);
  t.ok(now.includes('inet filter'), `the found table is back (${now.join(', ')})`);
  t.notOk(
    now.some((x) => /meshp_derived/.test(x)),
    'the derived table is gone',
  );
  t.same(readFileSync(l.configFile), configBefore);
  t.ok(open8080);
  t.notOk(open9000, 'the found firewall drops 9000 again');
  t.match(
    nodes.find((n) => n.name === 'server'),
    { mode: 'adopted', convergePreviewId: null, lifecycle: { state: 'adopted' } },
  );
  t.match(human.out, /server\s+\S+\s+ADOPTED/);
});

t.test('meshp node adopt of a node adopted already changes nothing and says so at once (issue 32)', async (t) => {
  const before = (await json<{ nodes: NodeJson[] }>('node', 'list')).nodes.find((n) => n.name === 'server')!;
  const r = await cli('node', 'adopt', 'server', '--yes', '--timeout', '60');
  t.equal(r.code, 0, r.err);
  t.match(r.out, /node server is already adopted, by its agent's last report: nothing to change/);
  t.notMatch(r.out, /waiting for its agent/, 'nothing waited for');
  const after = (await json<{ nodes: NodeJson[] }>('node', 'list')).nodes.find((n) => n.name === 'server')!;
  t.equal(after.stateVersion, before.stateVersion, 'no new state version');
  t.notMatch(after.status, /changing/i, 'not left CHANGING');
});

t.test('the machine changed between the preview and the flip: refused, and every view says adopted, never converged (issue 11 case 1)', async (t) => {
  const { preview } = await json<{ preview: { id: string } }>('node', 'converge', 'server', '--preview');
  await l.serve(l.server, 9100);
  const r = await cli('node', 'converge', 'server', '--yes', '--preview-id', preview.id, '--timeout', '60');
  t.equal(r.code, 1, 'refused');
  t.match(r.err, /^MESHP_PREVIEW_STALE: /);
  t.notMatch(r.out, /converged/, 'nothing printed says converged');
  const [{ nodes }, show, d, now] = await Promise.all([
    json<{ nodes: (NodeJson & { requestedMode: string; status: string; transition: { state: string; code: string } | null })[] }>('node', 'list'),
    cli('node', 'show', 'server'),
    json<{ verdict: string }>('doctor', 'server'),
    tables(),
  ]);
  const n = nodes.find((x) => x.name === 'server')!;
  t.equal(n.mode, 'adopted', "the mode is the agent's word");
  // The controller refuses when the agent already reported the new listener; else the agent refuses on the machine.
  if (/requested:/.test(r.out))
    t.match(
      n,
      { requestedMode: 'converged', status: 'refusing', transition: { state: 'refused', code: 'MESHP_PREVIEW_STALE' } },
      'refused by the agent: the transition says so',
    );
  t.notMatch(show.out, /: converged/);
  t.notMatch(d.verdict, /^converged/, 'never converged; in sync is true when the controller refused the flip and recorded nothing');
  t.ok(now.includes('inet filter'), 'the found firewall is still in force');
});

/**
 * Issue 33 item 6: a machine with a found firewall enrolled with a default token (converged asked)
 * is refused the flip (MESHP_MACHINE_IN_USE) and sits REFUSING. What the operator reads names the way
 * that keeps the machine serving, `meshp node adopt NODE` (or a token made with --adopted), before the
 * converge that would close what no module declares; and that way works: after `node adopt` the
 * node is adopted, the found firewall untouched. The controller, the agent and the CLI run inside
 * the lab's server namespace (a real found nftables ruleset), as lifecycle-remote.test.ts.
 */
import t from 'tap';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { labAvailable } from '../helpers/netns.js';
import { lab } from '../helpers/nft-lab.js';
import { meshpIn, nsCluster } from '../helpers/lifecycle-lab.js';

if (!labAvailable()) {
  t.plan(0, 'needs root for network namespaces');
  process.exit(0);
}

interface NodeJson {
  name: string;
  mode: string;
  requestedMode: string;
  status: string;
  advice: string | null;
  transition: { state: string; code: string } | null;
  lifecycle: { state: string } | null;
}

const l = await lab(t);
const dir = mkdtempSync(join(tmpdir(), `${l.prefix}-adv-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const cluster = await nsCluster(t, l.server, dir);
const cli = (...args: string[]) => meshpIn(l.server, [...args, ...cluster.admin]);
const nodeOf = async (): Promise<NodeJson | undefined> => {
  const r = await cli('node', 'show', 'server', '--json');
  return r.code === 0 ? (JSON.parse(r.out) as { node: NodeJson }).node : undefined;
};
async function until<T>(what: string, fn: () => Promise<T | false | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}; agent: ${JSON.stringify(agent.lines.slice(-6))} ${agent.stderr}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

// A default token: the node is enrolled to be converged.
const made = await cli('token', 'create', '--json');
const token = (JSON.parse(made.out) as { token: string }).token;
const agent = cluster.agent('server', token, l.root, [], 30);

t.test('REFUSING with MESHP_MACHINE_IN_USE, and every view names node adopt first', async (t) => {
  const n = await until('the flip refused', async () => {
    const x = await nodeOf();
    return x?.transition?.state === 'refused' && x;
  });
  t.match(n, { status: 'refusing', mode: 'adopted', requestedMode: 'converged', transition: { code: 'MESHP_MACHINE_IN_USE' } });
  t.match(
    n.advice,
    /^to keep server serving as it is: meshp node adopt server --yes \(enrol a machine in use with a token from meshp token create --adopted\); to converge it/,
  );
  const [list, show, doctor] = await Promise.all([cli('node', 'list'), cli('node', 'show', 'server'), cli('doctor', 'server')]);
  t.match(list.out, /REFUSING.*MESHP_MACHINE_IN_USE.*keep it serving: meshp node adopt server/, 'node list');
  t.match(show.out, /\nadvice: to keep server serving as it is: meshp node adopt server --yes/, 'node show');
  t.match(doctor.out, /^refusing: .*MESHP_MACHINE_IN_USE/m, 'doctor: refusing');
  t.match(doctor.out, /\nadvice: to keep server serving as it is: meshp node adopt server/, 'doctor: the same advice');
});

t.test('the advice works: node adopt brings it to adopted, the found table in place', async (t) => {
  const r = await cli('node', 'adopt', 'server', '--yes', '--timeout', '60');
  t.equal(r.code, 0, r.err);
  const n = await until('adopted, nothing refused', async () => {
    const x = await nodeOf();
    return x?.requestedMode === 'adopted' && x.mode === 'adopted' && x.status !== 'refusing' && x;
  });
  t.equal(n.advice, null, 'no advice once it is adopted');
  t.match(await l.nft(['list', 'tables']), /table inet filter/, 'the found table is still loaded');
});

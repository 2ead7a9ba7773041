/**
 * `meshp module untake` THROUGH THE CONTROLLER on a real nftables machine (issue 29): the controller,
 * the agent and the CLI run inside the lab's server namespace, the client probes from its own. The
 * untake preview is the agent's (from its report); a preview id the controller's last report does not
 * give is refused by the controller, one the machine no longer gives (a file edited since the report)
 * by the agent, the module kept taken and the refusal reported; the untake with the right id puts the
 * found file back byte for byte (mode, owner), removes the take's opening and leaves the found firewall
 * as it was before the take; take again works. `module release` of the held module leaves a file the
 * predecessor changed while held as it is; `--restore` puts its recorded original back (previewed).
 */
import t from 'tap';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, lab, reachable, splitLines } from '../helpers/nft-lab.js';
import { meshpIn, nsCluster } from '../helpers/lifecycle-lab.js';

if (!labAvailable()) {
  t.plan(0, 'needs root for network namespaces');
  process.exit(0);
}

interface Preview {
  module: string;
  id: string;
  steps: { key: string; op: string; what: string }[];
  blocks: { code: string }[];
}

const l = await lab(t);
const dir = mkdtempSync(join(tmpdir(), `${l.prefix}-mur-`));
t.teardown(() => rmSync(dir, { recursive: true, force: true }));
const CONF = '/etc/web/web.conf';
const FOUND = Buffer.from('listen 8080\n# the predecessor wrote this\n\u00e9\n');
const at = join(l.root, CONF);
mkdirSync(dirname(at), { recursive: true });
writeFileSync(at, FOUND);
chmodSync(at, 0o640);
chownSync(at, 33, 34);
await l.serve(l.server, 9090);

const cluster = await nsCluster(t, l.server, dir);
const cli = (...args: string[]) => meshpIn(l.server, [...args, ...cluster.admin]);
const json = async <T>(...args: string[]): Promise<T> => {
  const r = await cli(...args, '--json');
  if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
  return JSON.parse(r.out) as T;
};

async function until<T>(what: string, fn: () => Promise<T | false | undefined>, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out: ${what}; agent: ${JSON.stringify(agent.lines.slice(-8))} ${agent.stderr}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

const token = (await json<{ token: string }>('token', 'create', '--adopted')).token;
// No timer reconcile within the test: each step is a delta the agent reconciles at once, and a file
// edited between two of them is seen by the untake, not converged back first.
const agent = cluster.agent('server', token, l.root, [], 3600);
await agent.waitFor((x) => x.msg === 'enrolled');
const catalogue = join(dir, 'web.json');
writeFileSync(
  catalogue,
  JSON.stringify({
    modules: [
      { name: 'web', files: [{ path: CONF, content: 'listen 9090\n' }], openings: [{ port: 9090, path: 'incoming', from: [CLIENT_NET] }] },
      { name: 'extra' },
    ],
  }),
);
await json('catalogue', 'add', catalogue, '--yes');
const reconciled = (v: number) => agent.waitFor((x) => x.msg === 'reconciled' && Number(x.appliedVersion) >= v, 120_000);
await reconciled((await json<{ node: { stateVersion: number } }>('module', 'assign', 'server', 'web', '--yes')).node.stateVersion);
const foundBefore = (await splitLines(l)).theirs;
const previewNow = () => until('an untake preview', async () => (await json<{ preview: Preview }>('module', 'untake', 'server', 'web', '--preview')).preview);
const take = async () => {
  await reconciled((await json<{ node: { stateVersion: number } }>('module', 'take', 'server', 'web', '--yes')).node.stateVersion);
  return previewNow();
};

t.test('taken: the file converges, the opening is added, and the untake preview comes from the agent', async (t) => {
  const before = await cli('module', 'untake', 'server', 'web', '--preview');
  t.equal(before.code, 1, 'not taken yet');
  t.match(before.err, /^MESHP_UNTAKE_NOT_TAKEN: /);
  const p = await take();
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\n');
  t.ok(await reachable(l.client, SERVER_CLIENT, 9090, 10), 'taken: the opening lets the client in');
  t.same(p.blocks, []);
  t.match(p.steps, [
    { key: `file:${CONF}`, op: 'restore', what: /mode 0640, owner 33:34/ },
    { key: 'opening:web/incoming/tcp/9090', op: 'close' },
  ]);
  const human = await cli('module', 'untake', 'server', 'web', '--preview');
  t.equal(human.code, 0, human.err);
  t.match(human.out, new RegExp(`untake preview ${p.id} for module web on node server`));
  t.match(human.out, /file:\/etc\/web\/web\.conf\s+RESTORE/);
  t.match(human.out, /untake with --yes --preview-id /);
  const show = await json<{ untakePreviews: Preview[] }>('node', 'show', 'server');
  t.match(show.untakePreviews, [{ module: 'web', id: p.id }], 'node show says whether untake is possible');
});

t.test('a preview id the last report does not give: refused by the controller, nothing changed', async (t) => {
  const r = await cli('module', 'untake', 'server', 'web', '--yes', '--preview-id', 'deadbeefdeadbeef');
  t.equal(r.code, 1);
  t.match(r.err, /^MESHP_PREVIEW_STALE: .*deadbeefdeadbeef/);
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\n');
  t.ok(await reachable(l.client, SERVER_CLIENT, 9090, 10));
});

t.test('the machine changed since the report: refused by the agent, the module kept taken', async (t) => {
  const p = await previewNow();
  writeFileSync(at, 'listen 9090\nedited by hand\n');
  const r = await cli('module', 'untake', 'server', 'web', '--yes', '--preview-id', p.id);
  t.equal(r.code, 1, r.out);
  t.match(r.err, /^MESHP_PREVIEW_STALE: .*stays taken/);
  t.not(readFileSync(at, 'utf8'), FOUND.toString(), 'the original was not put back');
  t.ok(await reachable(l.client, SERVER_CLIENT, 9090, 10), 'the opening stays');
  const show = await json<{ untakes: { module: string; previewId: string; result: string; code: string }[] }>('node', 'show', 'server');
  t.match(show.untakes, [{ module: 'web', previewId: p.id, result: 'refused', code: 'MESHP_PREVIEW_STALE' }]);
  // Taken again, the untake asked is over.
  writeFileSync(at, 'listen 9090\n');
  await take();
});

t.test('untake: the original back byte for byte, the opening gone, the found firewall as before the take; take again works', async (t) => {
  const p = await previewNow();
  const r = await cli('module', 'untake', 'server', 'web', '--yes', '--preview-id', p.id);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /module web untaken on server, by its agent's report/);
  t.match(r.out, /held\s+file:\/etc\/web\/web\.conf/);
  t.same(readFileSync(at), FOUND, 'byte for byte');
  const st = statSync(at);
  t.same([st.mode & 0o7777, st.uid, st.gid], [0o640, 33, 34], 'mode and owner');
  t.notOk(await reachable(l.client, SERVER_CLIENT, 9090), "the take's opening is gone");
  t.same((await splitLines(l)).theirs, foundBefore, 'the found firewall differs from before the take by nothing');
  const list = await json<{ nodes: { taken: string[] }[] }>('node', 'list');
  t.same(list.nodes[0]!.taken, []);
  const again = await take();
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\n', 'taken again');
  t.ok(await reachable(l.client, SERVER_CLIENT, 9090, 10));
  t.same(again.blocks, []);
});

t.test('release: a held file changed while held stays as it is; with --restore its original comes back', async (t) => {
  const p = await previewNow();
  t.equal((await cli('module', 'untake', 'server', 'web', '--yes', '--preview-id', p.id)).code, 0);
  t.same(readFileSync(at), FOUND);
  // The predecessor changes its file while the mesh holds it; a delta (another module assigned) has the agent report it.
  const EDITED = 'listen 8080\n# changed by the predecessor while held\n';
  writeFileSync(at, EDITED);
  const changed = async () => {
    const r = await json<{ preview: Preview }>('module', 'release', 'server', 'web', '--restore', '--preview');
    return r.preview.steps.some((s) => s.op === 'restore') && r.preview;
  };
  await reconciled((await json<{ node: { stateVersion: number } }>('module', 'assign', 'server', 'extra', '--yes')).node.stateVersion);
  const plain = await cli('module', 'release', 'server', 'web', '--preview');
  t.equal(plain.code, 0, plain.err);
  t.match(plain.out, /1 held file\(s\) changed while held: --restore puts their originals back/);
  const r = await cli('module', 'release', 'server', 'web', '--yes');
  t.equal(r.code, 0, r.err);
  t.match(r.out, /its held files stay as they are/);
  t.equal(readFileSync(at, 'utf8'), EDITED, 'without --restore nothing changes');
  await reconciled((await json<{ node: { stateVersion: number } }>('module', 'assign', 'server', 'web', '--yes')).node.stateVersion);
  const preview = await until('the release preview names the changed file', changed);
  t.match(preview.steps, [{ key: `file:${CONF}`, op: 'restore', what: /changed while held; its original back \(\d+ bytes, mode 0640, owner 33:34\)/ }]);
  const stale = await cli('module', 'release', 'server', 'web', '--restore', '--yes', '--preview-id', 'deadbeefdeadbeef');
  t.equal(stale.code, 1);
  t.match(stale.err, /^MESHP_PREVIEW_STALE: /);
  t.equal(readFileSync(at, 'utf8'), EDITED, 'a stale preview changes nothing');
  const done = await cli('module', 'release', 'server', 'web', '--restore', '--yes', '--preview-id', preview.id);
  t.equal(done.code, 0, done.err);
  t.match(done.out, /1 held file\(s\) that changed while held put back/);
  t.same(readFileSync(at), FOUND, 'the recorded original, byte for byte');
  const st = statSync(at);
  t.same([st.mode & 0o7777, st.uid, st.gid], [0o640, 33, 34], 'mode and owner');
  const list = await json<{ nodes: { assigned: string[] }[] }>('node', 'list');
  t.same(list.nodes[0]!.assigned, ['extra'], 'released: no longer assigned');
});

/**
 * `meshp host untake` through the CLI on a real nftables machine (a lab namespace, issue 29): the
 * preview lists what the take changed and what untake does, changing nothing; untake puts the found
 * file back byte for byte with its mode and owner, removes the opening the take added (the client no
 * longer reaches its port) and leaves the found firewall as it was before the take, rule for rule;
 * `host status` says whether untake is possible; a stale preview id and a file edited since the take
 * are refused, coded, the edit shown as a diff, nothing changed; take again works.
 */
import t from 'tap';
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { meshpIn } from '../helpers/cli.js';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, lab, reachable, splitLines } from '../helpers/nft-lab.js';

if (!labAvailable()) {
  t.plan(0, 'needs root for network namespaces');
  process.exit(0);
}

const l = await lab(t);
const state = join(l.root, '..', `${l.prefix}-state`);
t.teardown(async () => (await import('node:fs/promises')).rm(state, { recursive: true, force: true }));
const CONF = '/etc/web/web.conf';
const FOUND = Buffer.from('listen 8080\n# the predecessor wrote this\n\u00e9\n');
const at = join(l.root, CONF);
mkdirSync(dirname(at), { recursive: true });
writeFileSync(at, FOUND);
chmodSync(at, 0o640);
chownSync(at, 33, 34);

const declare = (taken: boolean) => {
  const f = join(l.root, `web-${taken ? 'taken' : 'assigned'}.json`);
  const web = { name: 'web', taken, files: [{ path: CONF, content: 'listen 9090\n' }], openings: [{ port: 9090, path: 'incoming', from: [CLIENT_NET] }] };
  writeFileSync(f, JSON.stringify({ apiVersion: 'meshp/v1', node: 'server', mode: 'adopted', settings: { ports: {} }, modules: [web] }));
  return f;
};
const ASSIGNED = declare(false);
const TAKEN = declare(true);
const host = (...args: string[]) => meshpIn(l.server, ['host', ...args, '--state', state, '--root', l.root]);
await l.serve(l.server, 9090);

let foundBefore: string[] = [];

t.test('assigned, then taken: the file converges and the opening is added', async (t) => {
  t.equal((await host('apply', '--declaration', ASSIGNED, '--yes')).code, 0);
  foundBefore = (await splitLines(l)).theirs;
  t.notOk(await reachable(l.client, SERVER_CLIENT, 9090), 'held: the port waits for the take');
  const r = await host('apply', '--declaration', TAKEN, '--yes');
  t.equal(r.code, 0, r.err);
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\n');
  t.ok(await reachable(l.client, SERVER_CLIENT, 9090), 'taken: the opening lets the client in');
  const status = await meshpIn(l.server, ['host', 'status', '--state', state]);
  t.match(status.out, /untake \(from the records.*\n\s+web: possible; 1 resource to put back/);
  const doctor = await meshpIn(l.server, ['doctor', '--local', '--state', state, '--json']);
  t.match(JSON.parse(doctor.out).untake, [{ module: 'web', putBack: [`file:${CONF}`], blockedBy: [] }], 'doctor --local says so too');
});

t.test('a file edited since the take: refused with its diff, nothing changed', async (t) => {
  writeFileSync(at, 'listen 9090\nedited by hand\n');
  const r = await host('untake', 'web', '--declaration', TAKEN, '--yes');
  t.equal(r.code, 1);
  t.match(r.err, /^MESHP_UNTAKE_CHANGED: /);
  t.match(r.err, /\+edited by hand/);
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\nedited by hand\n');
  t.ok(await reachable(l.client, SERVER_CLIENT, 9090), 'the opening stays');
  writeFileSync(at, 'listen 9090\n');
});

t.test('the preview lists each resource and what untake does; a stale id is refused', async (t) => {
  const p = await host('untake', 'web', '--declaration', TAKEN, '--preview');
  t.equal(p.code, 0, p.err);
  t.match(p.out, /file:\/etc\/web\/web\.conf\s+RESTORE\s+.*mode 0640, owner 33:34/);
  t.match(p.out, /opening:web\/incoming\/tcp\/9090\s+CLOSE/);
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\n', 'the preview changed nothing');
  const stale = await host('untake', 'web', '--declaration', TAKEN, '--yes', '--preview-id', 'deadbeefdeadbeef');
  t.equal(stale.code, 1);
  t.match(stale.err, /^MESHP_PREVIEW_STALE: /);
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\n');
});

t.test('untake: the original back byte for byte, the opening gone, the found firewall as before the take', async (t) => {
  const j = JSON.parse((await host('untake', 'web', '--declaration', TAKEN, '--preview', '--json')).out);
  const r = await host('untake', 'web', '--declaration', TAKEN, '--yes', '--preview-id', j.preview.id);
  t.equal(r.code, 0, r.err);
  t.same(readFileSync(at), FOUND, 'byte for byte');
  const st = statSync(at);
  t.same([st.mode & 0o7777, st.uid, st.gid], [0o640, 33, 34], 'mode and owner');
  t.match(r.out, /\/etc\/web\/web\.conf\s+web\s+held/);
  t.notOk(await reachable(l.client, SERVER_CLIENT, 9090), "the take's opening is gone");
  t.same((await splitLines(l)).theirs, foundBefore, 'the found firewall differs from before the take by nothing');
  const again = await host('apply', '--declaration', ASSIGNED, '--yes');
  t.match(again.out, /\/etc\/web\/web\.conf\s+web\s+held/, 'held by later applies of the assigned module');
});

t.test('take again works', async (t) => {
  const r = await host('apply', '--declaration', TAKEN, '--yes');
  t.equal(r.code, 0, r.err);
  t.equal(readFileSync(at, 'utf8'), 'listen 9090\n');
  t.ok(await reachable(l.client, SERVER_CLIENT, 9090));
});

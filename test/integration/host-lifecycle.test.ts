/**
 * The node lifecycle through the CLI on a real nftables machine (a lab namespace): preview names
 * every reachable port and what closes; the flip loads the derived filter and retires the found
 * firewall with its configuration on disk; a stale preview is refused; returning to adopted brings
 * the found firewall back.
 */
import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { meshpIn } from '../helpers/cli.js';
import { labAvailable } from '../helpers/netns.js';
import { CLIENT_NET, SERVER_CLIENT, lab, reachable } from '../helpers/nft-lab.js';

if (!labAvailable()) {
  t.plan(0, 'needs root for network namespaces');
  process.exit(0);
}

const l = await lab(t);
const state = join(l.root, '..', `${l.prefix}-state`);
t.teardown(async () => (await import('node:fs/promises')).rm(state, { recursive: true, force: true }));
const declFile = join(l.root, 'declaration.json');
writeFileSync(
  declFile,
  JSON.stringify({
    apiVersion: 'meshp/v1',
    node: 'server',
    mode: 'adopted',
    settings: { ports: {} },
    modules: [{ name: 'web', taken: false, openings: [{ port: 8080, path: 'incoming', from: [CLIENT_NET] }] }],
  }),
);
const common = ['--state', state, '--root', l.root, '--declaration', declFile];
const configBefore = readFileSync(l.configFile);
await l.serve(l.server, 8080);
await l.serve(l.server, 9000);

const tables = async () =>
  (JSON.parse(await l.nft(['-j', 'list', 'tables'])).nftables as Record<string, { family: string; name: string }>[])
    .filter((o) => o.table)
    .map((o) => `${o.table!.family} ${o.table!.name}`);

let previewId = '';

t.test('the preview names each listening port, who declares it, and what will close', async (t) => {
  const r = await meshpIn(l.server, ['host', 'converge', ...common, '--preview', '--json']);
  t.equal(r.code, 0, r.err);
  const { preview } = JSON.parse(r.out);
  previewId = preview.id;
  const by = Object.fromEntries(preview.items.map((i: { port: number }) => [i.port, i]));
  t.match(by[8080], { source: 'socket', declaredBy: 'web', after: 'open', holder: /^busybox \(pid \d+\)$/ });
  t.match(by[9000], { source: 'socket', declaredBy: null, after: 'closes' });
  t.match(by[8080], { now: 'open', mentioned: true }, 'the found input chain accepts 8080 now');
  t.match(by[9000], { now: 'closed', mentioned: false }, 'and drops 9000 now');
  t.match(preview.firewall, { kind: 'nftables', active: true });
  t.same(preview.take, ['web']);
  t.ok(await reachable(l.client, SERVER_CLIENT, 8080), 'nothing changed: 8080 still served');
  t.same(readFileSync(l.configFile), configBefore);
  const human = await meshpIn(l.server, ['host', 'converge', ...common, '--preview']);
  // The found firewall drops 9000 already: the flip does not close it, it stays closed (issue 33, item 11).
  t.match(human.out, /9000\/tcp\s+socket.*stays closed/);
  t.match(human.out, /NOW\s+AFTER THE FLIP/);
  t.match(human.out, /8080\/tcp\s+socket.*\bopen\s+stays open from 10\.70\.1\.0\/24/);
  t.match(human.out, /9000\/tcp\s+socket.*\bclosed\s+stays closed/);
});

t.test('a stale preview is refused and changes nothing', async (t) => {
  const r = await meshpIn(l.server, ['host', 'converge', ...common, '--yes', '--preview-id', 'deadbeefdeadbeef']);
  t.equal(r.code, 1);
  t.match(r.err, /^MESHP_PREVIEW_STALE: /);
  t.ok((await tables()).includes('inet filter'));
  t.notOk((await tables()).includes('inet meshp_derived'));
});

t.test('the flip loads the derived filter and retires the found firewall, config kept on disk', async (t) => {
  // What an adopted node's applies leave: the mesh table with a batch receipt and a refusal.
  await l.load(`table inet meshp {
  set receipt { type mark; elements = { 7 } }
  chain input { type filter hook input priority 0; policy accept; tcp dport 7777 drop comment "meshp:old/incoming/tcp/7777"; }
}
`);
  t.ok((await tables()).includes('inet meshp'));
  const r = await meshpIn(l.server, ['host', 'converge', ...common, '--yes', '--preview-id', previewId]);
  t.equal(r.code, 0, r.err);
  t.match(r.out, /-> retiring the found nftables firewall/);
  const now = await tables();
  t.ok(
    now.some((x) => /meshp/.test(x)),
    `the mesh's derived table is loaded (${now.join(', ')})`,
  );
  t.notOk(now.includes('inet filter'), 'the found table is retired');
  t.notOk(now.includes('inet meshp'), "the adopted node's mesh table went with the flip: the derived filter holds it all");
  t.match(r.out, /removed the adopted node's marked rules/);
  t.same(readFileSync(l.configFile), configBefore, 'the found configuration is byte for byte on disk');
  t.ok(await reachable(l.client, SERVER_CLIENT, 8080), 'the declared port is open from its range');
  t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'the undeclared port is closed');
  const again = await meshpIn(l.server, ['host', 'converge', ...common, '--yes']);
  t.equal(again.code, 1, 'a converged node is not flipped twice');
  t.match(again.err, /MESHP_LIFECYCLE/);
});

t.test('returned to adopted, the found firewall is back and the derived filter gone', async (t) => {
  const r = await meshpIn(l.server, ['host', 'adopt', ...common, '--yes']);
  t.equal(r.code, 0, r.err);
  const now = await tables();
  t.ok(now.includes('inet filter'), `the found table is back (${now.join(', ')})`);
  t.notOk(now.includes('inet meshp_derived'));
  t.same(readFileSync(l.configFile), configBefore);
  t.ok(await reachable(l.client, SERVER_CLIENT, 8080));
  t.notOk(await reachable(l.client, SERVER_CLIENT, 9000), 'the found firewall drops 9000 again');
});

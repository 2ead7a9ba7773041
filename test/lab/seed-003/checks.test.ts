/**
 * Seed 003, "How it is checked", end to end on the lab bed: real namespaces, a real found nftables
 * firewall, a real Docker engine, the real CLI, controller and agents as processes.
 * The checks run in the order of ADR 0002's checks on one bed, each a subtest; the found firewall's reload and
 * the "reboot" of check 5 come last because a reboot also flushes Docker's rules.
 */
import t from 'tap';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import type Docker from 'dockerode';
import { inspectSpec } from '../../helpers/docker-lab.js';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { join } from 'node:path';
import { labAvailable } from '../../helpers/netns.js';
import { LAB_IMAGES } from '../../helpers/dockerd.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { FOUND_FIREWALL, M1, M1_OUT, PRIVATE, SERVICE_PORT, STRAY_PORT, WEB_CONF, WEB_CONF_BYTES, bed, fileBytes, type Bed, type Daemon } from './bed.js';

if (!labAvailable()) {
  t.plan(0, 'the lab needs root for namespaces, nftables and a Docker engine');
  process.exit(0);
}

// The whole scenario in idle-machine time; a busy machine gets more (see helpers/budget.ts).
fileBudget(300);
const b: Bed = await bed(t);
const sock = ['--docker-socket', b.engine.socket];
/** Genesis's stand-ins for the shipped catalogue's images: the lab has no registry. */
const images = ['--images', LAB_IMAGES];
const privateNet = ['--private-range', PRIVATE, '--private-interface', `${b.prefix}pa`];
const agentState = join(b.state, 'agent');
const CONTROL = 7443;
const STORE = 15432;

/** The found firewall's own rules: the table without the rules marked as the mesh's. */
async function foundRules(): Promise<string[]> {
  const doc = JSON.parse(await b.nft(['-j', 'list', 'table', 'inet', 'filter'])) as { nftables: Record<string, Record<string, unknown>>[] };
  return doc.nftables
    .filter((o) => o.rule && !String(o.rule.comment ?? '').startsWith('meshp:'))
    .map((o) => JSON.stringify({ ...o.rule, handle: undefined }).replace(/"counter":\{[^}]*\}/g, '"counter":{}'));
}

/** The handle of the control port's opening in the found table, or null when it is not there. */
async function controlOpening(): Promise<number | null> {
  const doc = JSON.parse(await b.nft(['-j', 'list', 'table', 'inet', 'filter'])) as { nftables: Record<string, Record<string, unknown>>[] };
  const rule = doc.nftables.find((o) => o.rule && String(o.rule.comment ?? '').startsWith('meshp:control/'));
  return rule ? Number(rule.rule!.handle) : null;
}

async function markedRules(): Promise<string[]> {
  const doc = JSON.parse(await b.nft(['-j', 'list', 'ruleset'])) as { nftables: Record<string, Record<string, unknown>>[] };
  return doc.nftables.filter((o) => o.rule && String(o.rule.comment ?? '').startsWith('meshp:')).map((o) => String(o.rule!.comment));
}

interface Report {
  mode: string;
  resources: { key: string; state: string; reason?: string }[];
}

async function report(): Promise<Report | null> {
  const r = await b.meshp(b.m1, ['host', 'status', '--state', agentState, '--json']);
  return r.code === 0 ? (JSON.parse(r.out) as Report) : null;
}

const stateOf = (r: Report | null, key: string) => r?.resources.find((x) => x.key === key)?.state;
const admin = (...args: string[]) => b.meshp(b.m1, [...args, '--state', b.state, '--controller', `127.0.0.1:${CONTROL}`]);

const foundBefore = await foundRules();
const confFound = statSync(join(b.root, WEB_CONF));
let webBefore: Docker.ContainerInspectInfo;
let rulesBeforeTake: string[] = [];
let controller: Daemon;
let agent1: Daemon;

t.test('1. genesis converged on the used machine refuses, naming the firewall and the listener', async (t) => {
  const r = await b.meshp(b.m1, ['genesis', '--state', b.state, '--root', b.root, ...sock, ...images, '--node', 'm1', '--yes']);
  t.equal(r.code, 1);
  t.match(r.err, /^MESHP_MACHINE_IN_USE: /);
  t.match(r.err, /active nftables firewall/);
  t.match(r.err, new RegExp(`container web publishing ${SERVICE_PORT}/tcp`));
  t.equal(r.err.trim().split('\n').length, 1, 'one line');
  t.notOk(existsSync(b.state), 'nothing written');
});

t.test('2. genesis adopted: the held registry port refused naming its holder; another port comes up, and stays', async (t) => {
  const held = await b.meshp(b.m1, ['genesis', '--state', b.state, '--root', b.root, ...sock, ...images, '--node', 'm1', '--adopted', ...privateNet, '--yes']);
  t.equal(held.code, 1);
  t.match(held.err, /^MESHP_PORT_HELD: port registry=15000 is held by .*container old-registry/);
  t.notOk(existsSync(b.state), 'nothing written');

  const up = await b.meshp(b.m1, [
    'genesis',
    '--state',
    b.state,
    '--root',
    b.root,
    ...sock,
    ...images,
    '--node',
    'm1',
    '--adopted',
    ...privateNet,
    '--port',
    'registry=15001',
    '--yes',
    '--json',
  ]);
  t.equal(up.code, 0, up.err);
  const g = JSON.parse(up.out);
  t.equal(g.plan.settings.ports.registry, 15001);
  const registry = await b.docker.getContainer('meshp-registry').inspect();
  t.equal(registry.HostConfig.PortBindings['5000/tcp'][0].HostPort, '15001', 'the foundation registry is on the port given');

  controller = b.daemon(b.m1, ['controller', 'serve', '--state', b.state, '--listen', g.listen], 'controller');
  agent1 = b.daemon(b.m1, ['agent', '--state', agentState, '--root', b.root, ...sock, '--interval', '2'], 'agent-m1');
  const converged = await until('the control-node agent to converge', async () => {
    const r = await admin('node', 'list', '--json');
    const n = r.code === 0 ? JSON.parse(r.out).nodes.find((x: { name: string }) => x.name === 'm1') : null;
    return n && n.gap === 0 && n.appliedVersion > 0 ? n : null;
  });
  t.equal(converged.mode, 'adopted');
  const after = await b.docker.getContainer('meshp-registry').inspect();
  t.equal(after.Id, registry.Id, 'adopting the foundation as modules kept the container');
  t.equal(after.HostConfig.PortBindings['5000/tcp'][0].HostPort, '15001', '... on that port');
});

t.test('3. nothing that serves changed', async (t) => {
  t.equal(await b.get(b.m2, M1, SERVICE_PORT), 'predecessor-web', 'the service answers from the second machine');
  t.equal(fileBytes(b, WEB_CONF), WEB_CONF_BYTES, 'the file is byte for byte what it was');
  t.same(await foundRules(), foundBefore, 'the found ruleset differs only by rules marked as the mesh');
  t.ok(
    (await markedRules()).some((c) => c.startsWith('meshp:control/')),
    'the control port is opened, marked',
  );
});

t.test('4. the store is unreachable from outside, and reachable over the private network', async (t) => {
  t.ok(await b.reachable(b.m2, M1, STORE), 'reachable from the private network');
  t.notOk(await b.reachable(b.m3, M1_OUT, STORE), 'not from a machine off it');
});

let agent2: Daemon;

t.test('5a. the second machine enrols through the found firewall', async (t) => {
  const tok = await admin('token', 'create', '--adopted', '--json');
  t.equal(tok.code, 0, tok.err);
  const { token } = JSON.parse(tok.out);
  const fp = JSON.parse(readFileSync(join(agentState, 'controller.json'), 'utf8')).fingerprint;
  t.ok(fp);
  agent2 = b.daemon(
    b.m2,
    [
      'agent',
      '--state',
      join(b.dir, 'm2-state'),
      '--root',
      join(b.dir, 'm2-root'),
      '--controller',
      `${M1}:${CONTROL}`,
      '--token',
      token,
      '--name',
      'm2',
      '--interval',
      '2',
    ],
    'agent-m2',
  );
  const m2 = await until('m2 to enrol and converge', async () => {
    const r = await admin('node', 'list', '--json');
    const n = r.code === 0 ? JSON.parse(r.out).nodes.find((x: { name: string }) => x.name === 'm2') : null;
    return n && n.gap === 0 && n.appliedVersion > 0 ? n : null;
  });
  t.equal(m2.mode, 'adopted');
  const doc = await b.meshp(b.m1, ['doctor', '--local', '--state', agentState, '--json']);
  t.equal(doc.code, 0, doc.err);
  const local = JSON.parse(doc.out);
  t.ok(local.appliedVersion > 0 && local.recentDeltas.length > 0, "the control-node's own store keeps what it applied, for doctor");
  t.equal(local.firewall, 'nftables');
});

let standIn: { stop(): void };

t.test('6. with the stand-in writing, the held file change is reported and not reverted', async (t) => {
  standIn = b.standIn();
  const a = await admin('module', 'assign', 'm1', 'web', '--yes');
  t.equal(a.code, 0, a.err);
  const r = await until('web.conf to be reported changed', async () => {
    const rep = await report();
    return stateOf(rep, `file:${WEB_CONF}`) === 'changed' ? rep : null;
  });
  t.equal(stateOf(r, `file:${WEB_CONF}`), 'changed');
  t.match(fileBytes(b, WEB_CONF), /written-by predecessor, pass \d+/, 'the predecessor content stays: not reverted');
});

t.test('7. assigning holds the found container and file; taking replaces them and opens the port', async (t) => {
  const held = await report();
  t.equal(stateOf(held, 'container:web'), 'held');
  t.equal(stateOf(held, `opening:web/forwarded/tcp/${SERVICE_PORT}`), 'pending');
  t.equal(await b.get(b.m2, M1, SERVICE_PORT), 'predecessor-web', 'the found container still serves');
  standIn.stop();
  webBefore = await b.docker.getContainer('web').inspect();
  rulesBeforeTake = await foundRules();
  const take = await admin('module', 'take', 'm1', 'web', '--yes');
  t.equal(take.code, 0, take.err);
  const r = await until(
    'web to be taken',
    async () => {
      const rep = await report();
      return stateOf(rep, 'container:web') === 'owned' && stateOf(rep, `file:${WEB_CONF}`) === 'owned' ? rep : null;
    },
    60,
  );
  t.ok(['created', 'owned'].includes(stateOf(r, `opening:web/forwarded/tcp/${SERVICE_PORT}`) ?? ''), 'its port is opened');
  t.equal(await until('the new web to serve', () => b.get(b.m2, M1, SERVICE_PORT).then((x) => x === 'mesh-web' && x)), 'mesh-web');
  t.match(fileBytes(b, WEB_CONF), /served-by meshp/);
});

t.test('7b. untake through the controller puts the predecessor back; take again works (issue 29)', async (t) => {
  const conf = join(b.root, WEB_CONF);
  const preview = await until(
    'the untake preview in the report',
    async () => {
      const r = await admin('module', 'untake', 'm1', 'web', '--preview', '--json');
      return r.code === 0 && (JSON.parse(r.out) as { preview: { id: string; steps: { key: string; op: string }[]; blocks: unknown[] } }).preview;
    },
    60,
  );
  t.same(preview.blocks, []);
  t.same(
    preview.steps.filter((s) => s.op !== 'close').map((s) => [s.key, s.op]),
    [
      ['container:web', 'recreate'],
      [`file:${WEB_CONF}`, 'restore'],
    ],
  );
  const r = await admin('module', 'untake', 'm1', 'web', '--yes', '--preview-id', preview.id, '--timeout', '120');
  t.equal(r.code, 0, r.err);
  t.equal(await until('the predecessor to serve', () => b.get(b.m2, M1, SERVICE_PORT).then((x) => x === 'predecessor-web' && x)), 'predecessor-web');
  const after = await b.docker.getContainer('web').inspect();
  t.not(after.Id, webBefore.Id, 'a new container');
  t.same(inspectSpec(after), inspectSpec(webBefore), 'inspect matches the recorded spec field by field, ids and timestamps aside');
  // The original is the first one recorded (ADR 0027): web.conf as the assignment found it, before the stand-in's later passes.
  const store = new SqliteHostStore(agentState);
  const original = await store.getOriginal(`file:${WEB_CONF}`).finally(() => store.close());
  t.same(readFileSync(conf), Buffer.from(original!.original), 'web.conf byte for byte its recorded original');
  const st = statSync(conf);
  t.same([st.mode & 0o7777, st.uid, st.gid], [confFound.mode & 0o7777, confFound.uid, confFound.gid], 'its mode and owner');
  const held = await report();
  t.equal(stateOf(held, 'container:web'), 'held');
  t.equal(stateOf(held, `opening:web/forwarded/tcp/${SERVICE_PORT}`), 'pending', "the mesh's opening for the module is gone");
  t.same(await foundRules(), rulesBeforeTake, 'the found firewall differs only by marked rules');
  const take = await admin('module', 'take', 'm1', 'web', '--yes');
  t.equal(take.code, 0, take.err);
  t.equal(await until('the new web to serve again', () => b.get(b.m2, M1, SERVICE_PORT).then((x) => x === 'mesh-web' && x)), 'mesh-web');
});

t.test('8. converging previews, then changes; returned to adopted, the found firewall is back', async (t) => {
  const pre = await admin('node', 'converge', 'm1', '--preview', '--json');
  t.equal(pre.code, 0, pre.err);
  const { preview } = JSON.parse(pre.out);
  const by = new Map<number, { declaredBy: string | null; after: string; source: string; now: string; mentioned?: boolean }>(
    preview.items.map((i: { port: number }) => [i.port, i]),
  );
  t.match(by.get(SERVICE_PORT), { declaredBy: 'web', after: 'open' }, "the preview names the service's port");
  t.match(by.get(STRAY_PORT), { source: 'published', declaredBy: null, after: 'closes' }, 'and a published port no firewall rule mentions');
  t.match(by.get(STRAY_PORT), { now: 'open', mentioned: false }, "... reachable now through Docker's NAT, though no rule of the found firewall names it");
  t.match(by.get(SERVICE_PORT), { now: 'open' }, "the service's port is reachable now");
  t.ok((await b.nft(['list', 'tables'])).includes('inet filter'), 'the preview changed nothing');

  const stale = await admin('node', 'converge', 'm1', '--yes', '--preview-id', '0000000000000000');
  t.equal(stale.code, 1);
  t.match(stale.err, /MESHP_PREVIEW_STALE/);

  const flip = await admin('node', 'converge', 'm1', '--yes', '--preview-id', preview.id, '--json');
  t.equal(flip.code, 0, flip.err);
  const tables = await b.nft(['list', 'tables']);
  t.match(tables, /inet meshp_derived/, "the mesh's derived filter is loaded");
  t.notMatch(tables, /inet filter/, 'the found firewall is disabled');
  t.equal(readFileSync(b.configFile, 'utf8'), FOUND_FIREWALL, '... its configuration still on disk');
  t.equal(await b.get(b.m2, M1, SERVICE_PORT), 'mesh-web', 'the declared port is open');
  t.notOk(await b.reachable(b.m2, M1, STRAY_PORT), 'the undeclared one is closed');
  const list = JSON.parse((await admin('node', 'list', '--json')).out);
  t.equal(list.nodes.find((n: { name: string }) => n.name === 'm1').mode, 'converged');

  const back = await admin('node', 'adopt', 'm1', '--yes', '--json');
  t.equal(back.code, 0, back.err);
  const again = await b.nft(['list', 'tables']);
  t.match(again, /inet filter/, 'returned to adopted, the found firewall is enabled again');
  t.notMatch(again, /inet meshp_derived/);
  t.same(await foundRules(), foundBefore, 'with its own rules as they were');
});

t.test('5b. the mesh keeps working after the found firewall reloads, and after a reboot', async (t) => {
  const before = await controlOpening();
  t.ok(before, 'the opening is there before the reload');
  await b.reload();
  // The reload flushes the found table, the mesh's rule with it; the watch or the next reconcile
  // puts it back (often before this line reads the table): a new rule, with a new handle.
  const mended = await until(
    'the opening to be mended',
    async () => {
      const h = await controlOpening();
      return h !== null && h !== before ? h : null;
    },
    30,
  );
  t.not(mended, before, 'the reload lost the opening and it was put back');
  t.ok(await b.reachable(b.m2, M1, CONTROL), 'the controller is reachable from the second machine again');

  await agent1.stop();
  await b.flushAndReload();
  t.notOk((await markedRules()).some((c) => c.startsWith('meshp:control/')));
  agent1 = b.daemon(b.m1, ['agent', '--state', agentState, '--root', b.root, ...sock, '--interval', '2'], 'agent-m1b');
  await until('the openings to be there again after the reboot', async () => (await markedRules()).some((c) => c.startsWith('meshp:control/')), 30);
  t.ok(await b.reachable(b.m2, M1, CONTROL));
  const r = await admin('node', 'list', '--json');
  t.equal(r.code, 0, r.err);
  await agent2.stop();
  await agent1.stop();
  await controller.stop();
  writeFileSync(join(b.dir, 'done'), '');
});

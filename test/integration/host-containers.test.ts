/**
 * The reconciler's found/held rule for containers, on a real Docker engine of the test's own:
 * a found container is held and keeps serving; one recreated by someone else is reported changed;
 * taking replaces it; unassigning never removes what was found; the host's own are removed; an
 * engine gone mid-life gives a coded refusal and loses no record.
 */
import t from 'tap';
import { LABEL_MODULE, LABEL_SPEC_HASH, type ModuleDecl } from '@meshp/core';
import { containerSpecHash } from '@meshp/core/reconcile';
import { DockerPlugin } from '@meshp/runtime-docker';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { labAvailable } from '../helpers/netns.js';
import { BUSYBOX_IMAGE, startDockerd } from '../helpers/dockerd.js';
import { probe, serving, webSpec } from '../helpers/docker-lab.js';
import { bed, declaration, stateOf } from '../helpers/host.js';
import { assertPrivate } from '../helpers/modes.js';

if (!labAvailable()) {
  t.plan(0, 'needs root to run a Docker engine in a namespace');
  process.exit(0);
}

const engine = await startDockerd(t, { tag: 'hc' });
const docker = engine.client();
const b = bed(t);
const plugin = () => [new DockerPlugin({ socketPath: engine.socket, stopGraceSeconds: 1 })];
const apply = (modules: ModuleDecl[]) => b.apply(declaration('adopted', modules), { extra: plugin() });

async function predecessor(name: string, port: number, text: string): Promise<string> {
  const c = await docker.createContainer({
    name,
    Image: BUSYBOX_IMAGE,
    Cmd: serving(text),
    ExposedPorts: { '80/tcp': {} },
    HostConfig: { PortBindings: { '80/tcp': [{ HostPort: String(port) }] } },
  });
  await c.start();
  return c.id;
}

const web = (taken: boolean): ModuleDecl => ({ name: 'web', taken, containers: [webSpec('web', 18080, 'mesh')] });

t.test('a found container on an adopted node is held and keeps serving', async (t) => {
  const id = await predecessor('web', 18080, 'predecessor');
  const r = await apply([web(false)]);
  t.equal(stateOf(r, 'container:web'), 'held');
  const info = await docker.getContainer('web').inspect();
  t.equal(info.Id, id, 'the same container: not stopped, renamed or replaced');
  t.equal(await probe(engine.netns, 18080), 'predecessor');
  const store = new SqliteHostStore(b.stateDir);
  assertPrivate(t, b.stateDir); // issue 13: the state folder 0700, its database 0600
  const [orig] = await store.listOriginals();
  await store.close();
  t.equal(JSON.parse(Buffer.from(orig!.original).toString()).Id, id, 'its inspect document is the original');
});

t.test('a held container recreated by someone else is reported changed, not reverted', async (t) => {
  await docker.getContainer('web').remove({ force: true });
  const id = await predecessor('web', 18080, 'predecessor again');
  const r = await apply([web(false)]);
  t.equal(stateOf(r, 'container:web'), 'changed');
  t.equal((await docker.getContainer('web').inspect()).Id, id);
  t.equal(await probe(engine.netns, 18080), 'predecessor again');
});

t.test('taking the module replaces the held container with the declared one', async (t) => {
  const r = await apply([web(true)]);
  t.equal(stateOf(r, 'container:web'), 'owned');
  const info = await docker.getContainer('web').inspect();
  t.equal(info.Config.Labels[LABEL_MODULE], 'web');
  t.equal(info.Config.Labels[LABEL_SPEC_HASH], containerSpecHash(webSpec('web', 18080, 'mesh')));
  t.equal(await probe(engine.netns, 18080), 'mesh');
  const again = await apply([web(true)]);
  t.equal(stateOf(again, 'container:web'), 'owned');
  t.equal((await docker.getContainer('web').inspect()).Id, info.Id, 'converged: not replaced again');
});

t.test('unassigning keeps a held container and removes the host own', async (t) => {
  await predecessor('legacy', 18081, 'legacy');
  const mods: ModuleDecl[] = [
    { name: 'legacy', taken: false, containers: [webSpec('legacy', 18081, 'mesh-legacy')] },
    { name: 'fresh', taken: false, containers: [webSpec('fresh', 18082, 'fresh')] },
  ];
  const r = await apply(mods);
  t.equal(stateOf(r, 'container:legacy'), 'held');
  t.equal(stateOf(r, 'container:fresh'), 'created');
  t.equal(await probe(engine.netns, 18082), 'fresh');
  const gone = await apply([]);
  t.equal(stateOf(gone, 'container:legacy'), 'released');
  t.equal(await probe(engine.netns, 18081), 'legacy', 'the held container still serves');
  const names = (await docker.listContainers({ all: true })).map((c) => c.Names[0]);
  t.notOk(names.includes('/fresh'), 'the host own container of an unassigned module is removed');
  t.ok(names.includes('/legacy'));
});

t.test('an engine that stops answering gives a coded refusal; files still converge; no record lost', async (t) => {
  const store = new SqliteHostStore(b.stateDir);
  const before = (await store.listOriginals()).map((o) => o.key).sort();
  await store.close();
  await engine.stop();
  const r = await apply([
    { name: 'legacy', taken: false, files: [{ path: '/etc/legacy.conf', content: 'x' }], containers: [webSpec('legacy', 18081, 'mesh-legacy')] },
  ]);
  t.equal(stateOf(r, 'container:legacy'), 'refused');
  t.match(r.report.resources.find((x) => x.key === 'container:legacy')?.reason, /MESHP_RUNTIME_UNAVAILABLE/);
  t.equal(stateOf(r, 'file:/etc/legacy.conf'), 'created');
  const after = new SqliteHostStore(b.stateDir);
  t.same((await after.listOriginals()).map((o) => o.key).sort(), before, 'every original is still recorded');
  await after.close();
});

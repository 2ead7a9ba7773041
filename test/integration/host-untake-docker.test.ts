/**
 * Untake of a taken container (issue 29) on a real Docker engine of the test's own: the predecessor
 * (its own image, a named and an anonymous volume, a user network with an alias, env, labels, restart
 * policy, user, working dir, health check, memory limit) is held, taken, then untaken: the predecessor
 * answers again, `docker inspect` of the recreated container matches the recorded one field by field
 * (ids and timestamps aside), its volumes are the same volumes with the same data, and take again works.
 * A removed volume and a removed image each refuse the untake, coded, with nothing changed.
 */
import t from 'tap';
import type Docker from 'dockerode';
import type { ModuleDecl } from '@meshp/core';
import { untake, UNTAKE_KEY } from '@meshp/core/reconcile';
import { DockerPlugin } from '@meshp/runtime-docker';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { labAvailable } from '../helpers/netns.js';
import { BUSYBOX_IMAGE, startDockerd } from '../helpers/dockerd.js';
import { inspectSpec as spec, probe, webSpec } from '../helpers/docker-lab.js';
import { bed, declaration, stateOf } from '../helpers/host.js';
import type { Subtest } from '../helpers/tap-types.js';

if (!labAvailable()) {
  t.plan(0, 'needs root to run a Docker engine in a namespace');
  process.exit(0);
}

const engine = await startDockerd(t, { tag: 'hu' });
const docker = engine.client();
const b = bed(t);
const plugin = () => [new DockerPlugin({ socketPath: engine.socket, stopGraceSeconds: 1 })];
const web = (taken: boolean): ModuleDecl => ({ name: 'web', taken, containers: [webSpec('web', 18080, 'mesh')] });
const apply = (taken: boolean) => b.apply(declaration('adopted', [web(taken)]), { extra: plugin() });
const SCRIPT =
  '[ -f /www/index.html ] || echo predecessor > /www/index.html; [ -f /www/stamp ] || cat /proc/sys/kernel/random/uuid > /www/stamp; ' +
  '[ -f /cache/stamp ] || cat /proc/sys/kernel/random/uuid > /cache/stamp; exec httpd -f -p 8080 -h /www';

/** The predecessor's own image (a commit of busybox with a file), so removing it removes nothing else. */
async function predecessorImage(): Promise<string> {
  const c = await docker.createContainer({ Image: BUSYBOX_IMAGE, Cmd: ['sh', '-c', 'echo v1 > /version'] });
  await c.start();
  await c.wait();
  const { Id } = (await c.commit({ repo: 'lab/pred', tag: '1', changes: ['VOLUME /cache'] })) as { Id: string };
  await c.remove();
  return Id;
}

async function predecessor(): Promise<Docker.ContainerInspectInfo> {
  await docker.createNetwork({ Name: 'webnet' });
  const c = await docker.createContainer({
    name: 'web',
    Image: 'lab/pred:1',
    Entrypoint: ['sh', '-c'],
    Cmd: [SCRIPT],
    Env: ['A=1', 'B=two words'],
    Labels: { app: 'web', tier: 'front' },
    User: '0:0',
    WorkingDir: '/www',
    ExposedPorts: { '8080/tcp': {} },
    Healthcheck: { Test: ['CMD', 'true'], Interval: 30e9, Retries: 2 },
    HostConfig: {
      Binds: ['web-data:/www'],
      PortBindings: { '8080/tcp': [{ HostPort: '18080' }] },
      RestartPolicy: { Name: 'unless-stopped' },
      Memory: 64 * 1024 * 1024,
      NetworkMode: 'webnet',
    },
    NetworkingConfig: { EndpointsConfig: { webnet: { Aliases: ['www'] } } },
  });
  await c.start();
  return c.inspect();
}

async function untakeWeb(options: Parameters<typeof untake>[3] = {}) {
  const h = b.host(plugin());
  try {
    return await untake(h, declaration('adopted', [web(true)]), 'web', options);
  } finally {
    await h.close();
  }
}

const cat = async (name: string, path: string) => {
  const exec = await docker.getContainer(name).exec({ Cmd: ['cat', path], AttachStdout: true });
  const stream = await exec.start({});
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).subarray(8).toString().trim(); // one stdout frame: an 8-byte header
};

const imageId = await predecessorImage();
const before = await predecessor();
const stamp = { www: '', cache: '' };

t.test('take, then untake: the predecessor is recreated from its record, its volumes and their data the same', async (t) => {
  t.equal(await probe(engine.netns, 18080), 'predecessor');
  stamp.www = await cat('web', '/www/stamp');
  stamp.cache = await cat('web', '/cache/stamp');
  t.equal(stateOf(await apply(false), 'container:web'), 'held');
  const tags = (await docker.getImage(imageId).inspect()).RepoTags;
  t.ok(tags.includes('meshp-original/web:' + imageId.slice(7, 19)), `the image is kept by a tag the mesh owns (${tags.join(', ')})`);
  t.equal(stateOf(await apply(true), 'container:web'), 'owned');
  t.equal(await probe(engine.netns, 18080), 'mesh', 'taken: the mesh serves');

  const preview = await untakeWeb({ preview: true });
  t.same(
    preview.plan.steps.map((s) => [s.key, s.op]),
    [['container:web', 'recreate']],
  );
  t.match(preview.plan.steps[0]!.what, /lab\/pred:1.*volumes .*web-data/);
  t.equal(await probe(engine.netns, 18080), 'mesh', 'the preview changed nothing');

  const done = await untakeWeb({ previewId: preview.plan.id });
  t.equal(stateOf(done.after!, 'container:web'), 'held', 'held again, not changed');
  t.equal(await probe(engine.netns, 18080), 'predecessor', 'the predecessor answers again');
  const after = await docker.getContainer('web').inspect();
  t.not(after.Id, before.Id, 'a new container');
  t.same(spec(after), spec(before), 'inspect matches the record field by field, ids and timestamps aside');
  t.equal(await cat('web', '/www/stamp'), stamp.www, 'the named volume, with its data');
  t.equal(await cat('web', '/cache/stamp'), stamp.cache, 'the anonymous volume reattached, not recreated empty');
  t.equal(after.State.Running, true);
  const names = (await docker.listContainers({ all: true })).map((c) => c.Names[0]);
  t.same(names, ['/web'], 'one container under the name, the mesh one gone, nothing left aside');
  const again = await apply(false);
  t.equal(stateOf(again, 'container:web'), 'held', 'a later reconcile keeps holding it');
});

t.test('take again works after an untake', async (t) => {
  t.equal(stateOf(await apply(true), 'container:web'), 'owned');
  t.equal(await probe(engine.netns, 18080), 'mesh');
});

t.test('an untake killed once the mesh container was put aside completes when run again, one container left', async (t) => {
  // What a kill -9 inside the runtime's restore leaves: the note of the untake, the mesh's container stopped and aside, the name free.
  const s = new SqliteHostStore(b.stateDir);
  await s.setValue(UNTAKE_KEY, { module: 'web', id: 'killed', at: 'then' });
  await s.close();
  const mesh = docker.getContainer('web');
  const { Id } = await mesh.inspect();
  await mesh.stop({ t: 1 });
  await mesh.rename({ name: `web-meshp-old-${Id.slice(0, 12)}` });
  const status = await untakeWeb({ preview: true });
  t.same(
    status.plan.steps.map((x) => x.op),
    ['recreate'],
  );
  const done = await untakeWeb();
  t.equal(stateOf(done.after!, 'container:web'), 'held');
  t.equal(await probe(engine.netns, 18080), 'predecessor');
  t.same(
    (await docker.listContainers({ all: true })).map((c) => c.Names[0]),
    ['/web'],
    'the predecessor alone: the mesh container left aside is removed',
  );
  const s2 = new SqliteHostStore(b.stateDir);
  t.equal(await s2.getValue(UNTAKE_KEY), null, 'the note is cleared');
  await s2.close();
  t.equal(stateOf(await apply(true), 'container:web'), 'owned', 'and taken again');
  t.equal(await probe(engine.netns, 18080), 'mesh');
});

async function refusedWithNothingChanged(t: Subtest, code: string) {
  const s = new SqliteHostStore(b.stateDir);
  const owned = await s.listOwned();
  await s.close();
  const id = (await docker.getContainer('web').inspect()).Id;
  const err = await untakeWeb().then(
    () => null,
    (e: { code: string; message: string }) => e,
  );
  t.equal(err?.code, code);
  t.match(err?.message, /nothing changed/);
  t.equal((await docker.getContainer('web').inspect()).Id, id, 'the mesh container untouched');
  t.equal(await probe(engine.netns, 18080), 'mesh');
  const s2 = new SqliteHostStore(b.stateDir);
  t.same(await s2.listOwned(), owned, 'no record changed');
  await s2.close();
}

t.test('a volume the predecessor used removed: refused, nothing changed', async (t) => {
  await docker.getVolume('web-data').remove();
  await refusedWithNothingChanged(t, 'MESHP_UNTAKE_VOLUME_GONE');
  await docker.createVolume({ Name: 'web-data' });
});

t.test('the original image removed: refused, nothing changed', async (t) => {
  await docker.getImage(imageId).remove({ force: true });
  await refusedWithNothingChanged(t, 'MESHP_UNTAKE_IMAGE_GONE');
});

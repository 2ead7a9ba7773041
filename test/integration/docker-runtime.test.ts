import t from 'tap';
import Docker from 'dockerode';
import { LABEL_MODULE, LABEL_NODE, LABEL_SPEC_HASH, MeshpError, type ContainerMark, type ContainerSpec } from '@meshp/core';
import { DockerPlugin, DockerRuntime, asideName, specHash } from '@meshp/runtime-docker';
import { runtimeConformance } from '@meshp/testkit';
import { labAvailable } from '../helpers/netns.js';
import { BUSYBOX_IMAGE, startDockerd } from '../helpers/dockerd.js';
import { probe, serving, webSpec } from '../helpers/docker-lab.js';

if (!labAvailable()) {
  t.plan(0, 'needs root to run a Docker engine in a namespace');
  process.exit(0);
}

const engine = await startDockerd(t, { tag: 'dk' });
const ns = engine.netns;
const docker: Docker = engine.client();
const runtime = new DockerRuntime({ socketPath: engine.socket, stopGraceSeconds: 1 });

function mark(spec: ContainerSpec, module = 'site'): ContainerMark {
  return { node: 'n1', module, specHash: specHash(spec) };
}

async function caught(p: Promise<unknown>): Promise<MeshpError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!(e instanceof MeshpError)) throw new Error(`expected a MeshpError, got ${String(e)}`);
  return e;
}

async function idOf(name: string): Promise<string | undefined> {
  return (await runtime.inspect(name))?.info.id;
}

async function names(): Promise<string[]> {
  return (await runtime.list()).map((c) => c.name);
}

// The predecessor's service, made directly on the engine: a found container.
const found = await docker.createContainer({
  name: 'web',
  Image: BUSYBOX_IMAGE,
  Cmd: serving('found'),
  ExposedPorts: { '80/tcp': {} },
  HostConfig: { PortBindings: { '80/tcp': [{ HostPort: '18080' }] } },
});
await found.start();

t.test('a found container is listed with its published ports and no mesh labels', async (t) => {
  t.equal(await probe(ns, 18080), 'found');
  const web = (await runtime.list()).find((c) => c.name === 'web');
  t.ok(web, 'listed by its name, without the leading slash');
  t.equal(web!.id, found.id);
  t.equal(web!.image, BUSYBOX_IMAGE);
  t.equal(web!.state, 'running');
  t.notOk(
    Object.keys(web!.labels).some((k) => k.startsWith('meshp.')),
    'no meshp labels',
  );
  t.ok(web!.ports.length > 0);
  for (const p of web!.ports) t.match(p, { container: 'web', containerPort: 80, hostPort: 18080, protocol: 'tcp' });
  t.ok(web!.ports.some((p) => p.hostIp === '0.0.0.0'));
  t.same(
    (await runtime.publishedPorts()).filter((p) => p.container === 'web'),
    web!.ports,
    'publishedPorts names the same ports',
  );
});

t.test('inspect gives the same info as list and the whole inspect document', async (t) => {
  const got = await runtime.inspect('web');
  t.ok(got);
  const listed = (await runtime.list()).find((c) => c.name === 'web');
  t.same(got!.info, listed, 'same name, id, image, state, labels and ports');
  const doc = got!.document as { Id: string; Name: string; Config: { Cmd: string[] } };
  t.equal(doc.Id, found.id);
  t.equal(doc.Name, '/web');
  t.same(doc.Config.Cmd, serving('found'));
});

t.test('a name that only matches an id prefix, or nothing, is no container', async (t) => {
  t.equal(await runtime.inspect(found.id.slice(0, 6)), null);
  t.equal(await runtime.inspect('absent'), null);
});

const app1 = webSpec('app', 18081, 'v1');

t.test('ensure creates an absent container, labelled with the mark, and it serves', async (t) => {
  await runtime.ensure(app1, mark(app1));
  const got = await runtime.inspect('app');
  t.ok(got);
  t.same(got!.info.labels, { [LABEL_MODULE]: 'site', [LABEL_SPEC_HASH]: specHash(app1), [LABEL_NODE]: 'n1' });
  t.equal(got!.info.state, 'running');
  t.equal(await probe(ns, 18081), 'v1');
  t.equal(await idOf('web'), found.id, 'the found container is untouched');
});

t.test('ensure with the same spec hash changes nothing', async (t) => {
  const before = await idOf('app');
  await runtime.ensure(app1, mark(app1));
  t.equal(await idOf('app'), before, 'same container');
  t.equal(await probe(ns, 18081), 'v1');
});

const app2 = webSpec('app', 18081, 'v2', { env: { MODE: 'two' }, restart: 'unless-stopped' });

t.test('ensure with a new spec hash replaces the container, and the new one serves', async (t) => {
  const before = await idOf('app');
  await runtime.ensure(app2, mark(app2));
  const got = await runtime.inspect('app');
  t.not(got!.info.id, before, 'a new container');
  t.equal(got!.info.labels[LABEL_SPEC_HASH], specHash(app2));
  const doc = got!.document as { Config: { Env: string[] }; HostConfig: { RestartPolicy: { Name: string } } };
  t.ok(doc.Config.Env.includes('MODE=two'));
  t.equal(doc.HostConfig.RestartPolicy.Name, 'unless-stopped');
  t.equal(await probe(ns, 18081), 'v2');
  t.notOk(
    (await names()).some((n) => n.includes('-meshp-old-')),
    'the old one is removed',
  );
  t.equal(await runtime.inspect(asideName('app', before!)), null);
});

t.test('a failed start rolls back to the old container, which still serves', async (t) => {
  const blocker = await docker.createContainer({
    name: 'blocker',
    Image: BUSYBOX_IMAGE,
    Cmd: serving('blocker'),
    ExposedPorts: { '80/tcp': {} },
    HostConfig: { PortBindings: { '80/tcp': [{ HostPort: '18090' }] } },
  });
  await blocker.start();
  t.equal(await probe(ns, 18090), 'blocker');
  const before = await idOf('app');
  const listed = await names();

  const taken = webSpec('app', 18090, 'v3');
  const e = await caught(runtime.ensure(taken, mark(taken)));
  t.equal(e.code, 'MESHP_RUNTIME_FAILED');
  t.match(e.message, /starting container app/);
  t.match(e.message, /rolled back/);
  t.equal(e.details?.rolledBack, true);
  t.ok(e.cause, 'the engine error is kept');
  t.equal(await idOf('app'), before, 'the old container is back under its name');
  t.equal((await runtime.inspect('app'))!.info.state, 'running');
  t.equal(await probe(ns, 18081), 'v2', 'and still serves');
  t.equal(await probe(ns, 18090), 'blocker', 'the other container is untouched');
  t.same(await names(), listed, 'nothing left behind');

  const broken = webSpec('app', 18081, 'v4', { command: ['/bin/nosuch'] });
  const e2 = await caught(runtime.ensure(broken, mark(broken)));
  t.equal(e2.code, 'MESHP_RUNTIME_FAILED');
  t.match(e2.message, /nosuch/);
  t.equal(await idOf('app'), before);
  t.equal(await probe(ns, 18081), 'v2');
  t.same(await names(), listed);
  await blocker.remove({ force: true });
});

t.test('a missing image is a coded error naming it, and nothing changes', async (t) => {
  const before = await runtime.list();
  const missing = webSpec('app', 18081, 'v5', { image: 'lab/absent:9' });
  const e = await caught(runtime.ensure(missing, mark(missing)));
  t.equal(e.code, 'MESHP_IMAGE_MISSING');
  t.match(e.message, /lab\/absent:9/);
  t.equal(e.details?.image, 'lab/absent:9');
  const fresh = webSpec('other', 18082, 'x', { image: 'lab/absent:9' });
  t.equal((await caught(runtime.ensure(fresh, mark(fresh)))).code, 'MESHP_IMAGE_MISSING');
  t.same(await runtime.list(), before, 'same containers, same ids, same states');
  t.equal(await probe(ns, 18081), 'v2');
});

t.test('ensure finishes a replacement an earlier ensure left half done', async (t) => {
  const before = (await runtime.inspect('app'))!.info.id;
  // As if the host died after stopping and renaming the old one aside.
  await docker.getContainer(before).stop({ t: 1 });
  await docker.getContainer(before).rename({ name: asideName('app', before) });
  const app3 = webSpec('app', 18081, 'v3');
  await runtime.ensure(app3, mark(app3));
  t.not(await idOf('app'), before);
  t.equal(await probe(ns, 18081), 'v3');
  t.notOk(
    (await names()).some((n) => n.includes('-meshp-old-')),
    'the aside container is removed',
  );
});

t.test('ensuring a declared spec at the name of a found container replaces it (the cutover)', async (t) => {
  const spec = webSpec('web', 18080, 'taken');
  await runtime.ensure(spec, mark(spec, 'www'));
  const got = await runtime.inspect('web');
  t.not(got!.info.id, found.id);
  t.equal(got!.info.labels[LABEL_MODULE], 'www');
  t.equal(await probe(ns, 18080), 'taken');
  t.equal(await runtime.inspect(asideName('web', found.id)), null, 'the found container is gone');
});

t.test('remove stops and removes; removing an absent container is nothing', async (t) => {
  await runtime.remove('app');
  t.equal(await runtime.inspect('app'), null);
  t.equal(await probe(ns, 18081, 2), null, 'nothing serves its port');
  await runtime.remove('app');
  t.same(await names(), ['web']);
});

t.test('an absent socket is MESHP_RUNTIME_UNAVAILABLE', async (t) => {
  const gone = new DockerRuntime({ socketPath: `${engine.dir}/absent.sock` });
  const e = await caught(gone.list());
  t.equal(e.code, 'MESHP_RUNTIME_UNAVAILABLE');
  t.match(e.message, /absent\.sock/);
  t.equal((await caught(gone.ensure(app1, mark(app1)))).code, 'MESHP_RUNTIME_UNAVAILABLE');
});

// The testkit's runtime conformance suite on this file's engine (an engine costs seconds): its own
// container names (kit-*) and ports (18181-18183), so nothing above is disturbed.
t.test('the runtime conformance kit (@meshp/testkit) against runtime-docker', async (t) => {
  runtimeConformance(t, {
    async engine() {
      return {
        plugin: new DockerPlugin({ stopGraceSeconds: 1 }),
        hostOptions: { dockerSocket: engine.socket },
        image: BUSYBOX_IMAGE,
        get: async (port) => (await probe(ns, port, 1)) ?? null,
        async foreign(name, hostPort, text) {
          const c = await docker.createContainer({
            name,
            Image: BUSYBOX_IMAGE,
            Cmd: serving(text),
            ExposedPorts: { '80/tcp': {} },
            HostConfig: { PortBindings: { '80/tcp': [{ HostPort: String(hostPort) }] } },
          });
          await c.start();
        },
      };
    },
  });
});

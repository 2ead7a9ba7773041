import t from 'tap';
import { MeshpError, type ContainerSpec } from '@meshp/core';
import { DockerRuntime, asideName } from '@meshp/runtime-docker';
import { fakeEngine, inspectDoc } from '../helpers/docker-fake.js';
import { loadFactor } from '../helpers/budget.js';

const spec: ContainerSpec = { name: 'svc', image: 'lab/busybox:1', command: ['httpd', '-f'], ports: [{ container: 80, host: 18080 }] };
const mark = { node: 'n1', module: 'svc', specHash: 'new' };
const OLD = 'a'.repeat(64);
const NEW = 'b'.repeat(64);

async function caught(p: Promise<unknown>): Promise<MeshpError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!(e instanceof MeshpError)) throw new Error(`expected a MeshpError, got ${String(e)}`);
  return e;
}

t.test('an engine that accepts and never answers is MESHP_RUNTIME_UNAVAILABLE after the timeout', async (t) => {
  const fake = await fakeEngine(t);
  fake.route('GET /containers/json', 'hang');
  const runtime = new DockerRuntime({ socketPath: fake.socket, timeoutMs: 200 });
  const started = Date.now();
  const e = await caught(runtime.list());
  t.equal(e.code, 'MESHP_RUNTIME_UNAVAILABLE');
  t.match(e.message, fake.socket);
  t.ok(Date.now() - started < 3000 * loadFactor(), 'answered after its 200 ms timeout, not after a hang (stretched by the load: budget.ts)');
});

t.test('an engine refusal is MESHP_RUNTIME_FAILED with the engine message and the cause kept', async (t) => {
  const fake = await fakeEngine(t);
  fake.route('GET /containers/json', { status: 500, body: { message: 'disk on fire' } });
  const e = await caught(new DockerRuntime({ socketPath: fake.socket }).list());
  t.equal(e.code, 'MESHP_RUNTIME_FAILED');
  t.match(e.message, /listing containers: disk on fire/);
  t.match(e.cause, { statusCode: 500 });
});

t.test('a missing image is MESHP_IMAGE_MISSING naming it, and the engine is asked to change nothing', async (t) => {
  const fake = await fakeEngine(t);
  fake.route('GET /containers/svc/json', { status: 200, body: inspectDoc('svc', OLD, { 'meshp.spec-hash': 'old' }) });
  fake.route('GET /images/lab/busybox:1/json', { status: 404, body: { message: 'No such image: lab/busybox:1' } });
  const e = await caught(new DockerRuntime({ socketPath: fake.socket }).ensure(spec, mark));
  t.equal(e.code, 'MESHP_IMAGE_MISSING');
  t.match(e.message, 'lab/busybox:1');
  t.same(e.details, { image: 'lab/busybox:1', container: 'svc' });
  t.same(
    fake.requests.filter((r) => !r.startsWith('GET ')),
    [],
    'no stop, rename, create or start',
  );
});

t.test('an own container with the same spec hash is left alone: one inspect, nothing else', async (t) => {
  const fake = await fakeEngine(t);
  fake.route('GET /containers/svc/json', { status: 200, body: inspectDoc('svc', OLD, { 'meshp.spec-hash': 'new' }) });
  await new DockerRuntime({ socketPath: fake.socket }).ensure(spec, mark);
  t.same(
    fake.requests.map((r) => r.split('?')[0]),
    ['GET /containers/svc/json'],
  );
});

t.test('a replacement goes stop, rename aside, create, start, remove the old one', async (t) => {
  const fake = await fakeEngine(t);
  fake.route('GET /containers/svc/json', { status: 200, body: inspectDoc('svc', OLD, {}) });
  fake.route('GET /images/lab/busybox:1/json', { status: 200, body: { Id: 'sha256:1' } });
  fake.route(`POST /containers/${OLD}/stop`, { status: 204 });
  fake.route(`POST /containers/${OLD}/rename`, { status: 204 });
  fake.route('POST /containers/create', { status: 201, body: { Id: NEW } });
  fake.route(`POST /containers/${NEW}/start`, { status: 204 });
  fake.route(`DELETE /containers/${OLD}`, { status: 204 });
  await new DockerRuntime({ socketPath: fake.socket, stopGraceSeconds: 3 }).ensure(spec, mark);
  t.same(
    fake.requests.filter((r) => !r.startsWith('GET ')),
    [
      `POST /containers/${OLD}/stop?t=3`,
      `POST /containers/${OLD}/rename?name=${asideName('svc', OLD)}`,
      'POST /containers/create?name=svc',
      `POST /containers/${NEW}/start`,
      `DELETE /containers/${OLD}?force=true`,
    ],
  );
});

t.test('a failed start whose rollback fails too says so, naming both', async (t) => {
  const fake = await fakeEngine(t);
  fake.route('GET /containers/svc/json', { status: 200, body: inspectDoc('svc', OLD, { 'meshp.spec-hash': 'old' }) });
  fake.route('GET /images/lab/busybox:1/json', { status: 200, body: { Id: 'sha256:1' } });
  fake.route(`POST /containers/${OLD}/stop`, { status: 204 });
  let renames = 0;
  fake.route(`POST /containers/${OLD}/rename`, () => (++renames === 1 ? { status: 204 } : { status: 500, body: { message: 'name in use' } }));
  fake.route('POST /containers/create', { status: 201, body: { Id: NEW } });
  fake.route(`POST /containers/${NEW}/start`, { status: 500, body: { message: 'port is already allocated' } });
  fake.route(`DELETE /containers/${NEW}`, { status: 204 });
  const e = await caught(new DockerRuntime({ socketPath: fake.socket }).ensure(spec, mark));
  t.equal(e.code, 'MESHP_RUNTIME_FAILED');
  t.match(e.message, /port is already allocated/);
  t.match(e.message, /rollback failed too: renaming the previous container back/);
  t.equal(e.details?.rolledBack, false);
  t.equal(e.details?.previous, OLD);
  t.ok(fake.requests.includes(`DELETE /containers/${NEW}?force=true`), 'the new container is removed');
});

t.test('DOCKER_HOST in the environment does not redirect the runtime from its socket', async (t) => {
  const fake = await fakeEngine(t);
  fake.route('GET /containers/json', { status: 200, body: [] });
  const saved = process.env.DOCKER_HOST;
  process.env.DOCKER_HOST = 'tcp://127.0.0.1:1';
  t.teardown(() => {
    if (saved === undefined) delete process.env.DOCKER_HOST;
    else process.env.DOCKER_HOST = saved;
  });
  t.same(await new DockerRuntime({ socketPath: fake.socket }).list(), []);
  t.equal(fake.requests.length, 1);
});

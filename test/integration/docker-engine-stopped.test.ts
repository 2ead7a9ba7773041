import { sigstop } from '../helpers/sigstop.js';
import t from 'tap';
import { MeshpError, type HostReport } from '@meshp/core';
import { Host } from '@meshp/core/host';
import { DockerPlugin, DockerRuntime, specHash } from '@meshp/runtime-docker';
import { labAvailable } from '../helpers/netns.js';
import { startDockerd } from '../helpers/dockerd.js';
import { probe, webSpec } from '../helpers/docker-lab.js';
import { loadFactor } from '../helpers/budget.js';

if (!labAvailable()) {
  t.plan(0, 'needs root to run a Docker engine in a namespace');
  process.exit(0);
}

const engine = await startDockerd(t, { tag: 'dk' });
const runtime = new DockerRuntime({ socketPath: engine.socket, stopGraceSeconds: 1, timeoutMs: 800 });
const spec = webSpec('svc', 18100, 'one');
const mark = { node: 'n1', module: 'svc', specHash: specHash(spec) };

async function caught(p: Promise<unknown>): Promise<MeshpError> {
  const e = await p.then(
    () => null,
    (err: unknown) => err,
  );
  if (!(e instanceof MeshpError)) throw new Error(`expected a MeshpError, got ${String(e)}`);
  return e;
}

function emptyReport(): HostReport {
  return {
    node: 'n1',
    mode: 'adopted',
    at: new Date().toISOString(),
    firewall: null,
    resources: [],
    counts: { created: 0, owned: 0, held: 0, changed: 0, released: 0, pending: 0, refused: 0, unverified: 0 },
    facts: {},
  };
}

// Setting up gets the default timeout: a busy machine's engine may take longer than 800 ms to create.
const setup = new DockerRuntime({ socketPath: engine.socket, stopGraceSeconds: 1 });
await setup.ensure(spec, mark);
const id = (await setup.inspect('svc'))!.info.id;

t.test('the plugin provides the runtime on the socket the host was given, and reports its published ports', async (t) => {
  const host = new Host({ dockerSocket: engine.socket }).use(new DockerPlugin());
  const provided = await host.runtime();
  t.ok(provided instanceof DockerRuntime);
  t.equal((provided as DockerRuntime).socketPath, engine.socket);
  t.equal((await provided!.inspect('svc'))?.info.id, id);
  const report = await host.hooks.report.promise(emptyReport());
  t.match(report.facts, { containerRuntime: { available: true, socket: engine.socket } });
  t.same(report.facts.publishedPorts, await runtime.publishedPorts());
});

t.test('an engine that does not answer is MESHP_RUNTIME_UNAVAILABLE within the timeout, and nothing changes', async (t) => {
  await sigstop(engine.pid);
  try {
    const started = Date.now();
    const e = await caught(runtime.list());
    t.equal(e.code, 'MESHP_RUNTIME_UNAVAILABLE');
    t.match(e.message, engine.socket);
    t.ok(Date.now() - started < 5000 * loadFactor(), 'answers within a few timeouts (stretched by the load: budget.ts)');
    t.ok(e.cause, 'the transport error is kept');
    const next = webSpec('svc', 18100, 'two');
    t.equal((await caught(runtime.ensure(next, { ...mark, specHash: specHash(next) }))).code, 'MESHP_RUNTIME_UNAVAILABLE');
    t.equal((await caught(runtime.remove('svc'))).code, 'MESHP_RUNTIME_UNAVAILABLE');
  } finally {
    process.kill(engine.pid, 'SIGCONT');
  }
  const after = await runtime.inspect('svc');
  t.equal(after?.info.id, id, 'the same container');
  t.equal(after?.info.state, 'running');
  t.equal(await probe(engine.netns, 18100), 'one', 'and it still serves');
});

t.test('an engine stopped is MESHP_RUNTIME_UNAVAILABLE for every call, and the report says so', async (t) => {
  const host = new Host({ dockerSocket: engine.socket }).use(new DockerPlugin({ timeoutMs: 800 }));
  const provided = (await host.runtime())!;
  await engine.stop();
  for (const [what, call] of [
    ['list', () => runtime.list()],
    ['inspect', () => runtime.inspect('svc')],
    ['publishedPorts', () => runtime.publishedPorts()],
    ['ensure', () => runtime.ensure(spec, mark)],
    ['remove', () => runtime.remove('svc')],
    ['ping', () => runtime.ping()],
  ] as const) {
    const e = await caught(call());
    t.equal(e.code, 'MESHP_RUNTIME_UNAVAILABLE', what);
  }
  t.equal((await caught(provided.list())).code, 'MESHP_RUNTIME_UNAVAILABLE', 'through the host too');
  const report = await host.hooks.report.promise(emptyReport());
  t.match(report.facts, { containerRuntime: { available: false, reason: /MESHP_RUNTIME_UNAVAILABLE/ } });
  t.notOk('publishedPorts' in report.facts);
});

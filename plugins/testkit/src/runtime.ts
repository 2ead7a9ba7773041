/**
 * The container-runtime conformance suite: what every `runtime` provider promises (`@meshp/core`'s
 * ContainerRuntime), checked on a real engine of the test's own. The kit cannot make
 * an engine of every kind, so the author's `engine` starts one (its own data root and socket, its
 * clean-up on `t`) and hands over the plugin speaking to it; the runtime is asked for through a
 * Host, as the agent asks for it. The checks share the engine and run in order, each on
 * containers of its own names.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  LABEL_MODULE,
  LABEL_NODE,
  LABEL_SPEC_HASH,
  isMeshpError,
  type ContainerMark,
  type ContainerRuntime,
  type ContainerSpec,
  type HostOptions,
  type Plugin,
} from '@meshp/core';
import { Host } from '@meshp/core/host';
import type { KitTest, Teardown } from './kit-test.js';

export interface RuntimeKitEngine {
  /** The author's plugin, set up to speak to this engine. */
  plugin: Plugin;
  /** Host options the plugin reads (e.g. `dockerSocket`), as `meshp host apply` would pass them. */
  hostOptions?: Partial<HostOptions>;
  /** An image on the engine with busybox's `sh` and `httpd`: the kit pulls nothing. */
  image: string;
  /** One GET / on a published host port, from where the engine publishes it: the body, or null. */
  get(port: number): Promise<string | null>;
  /** Runs a container the mesh did not make (a predecessor's service) with the engine's own client. */
  foreign(name: string, hostPort: number, text: string): Promise<void>;
}

export type RuntimeCheck = 'provided' | 'ensure' | 'idempotent' | 'replace' | 'rollback' | 'foreign' | 'remove';

export interface RuntimeKitSpec {
  /** Starts an engine of the test's own (or says why it cannot); made once for all the checks. */
  engine(t: Teardown): Promise<RuntimeKitEngine>;
  /** Checks known to fail, each with its bug named: run as tap todos (see FirewallKitSpec.known). */
  known?: Partial<Record<RuntimeCheck, string>>;
}

const NODE = 'kit-node';
const MODULE = 'kit';
const PORTS = Object.freeze({ web: 18181, taken: 18182, foreign: 18183 });

/** busybox httpd serving `text` at / on port 80. */
function serving(text: string): string[] {
  return ['sh', '-c', `mkdir -p /www && echo ${text} > /www/index.html && exec httpd -f -p 80 -h /www`];
}

function web(image: string, text: string, hostPort: number = PORTS.web): ContainerSpec {
  return { name: 'kit-web', image, command: serving(text), ports: [{ container: 80, host: hostPort, protocol: 'tcp' }] };
}

/** The mark the reconciler would give: a hash of the spec, so another spec is another mark. */
function markOf(spec: ContainerSpec): ContainerMark {
  return { node: NODE, module: MODULE, specHash: createHash('sha256').update(JSON.stringify(spec)).digest('hex').slice(0, 16) };
}

interface Bed extends RuntimeKitEngine {
  runtime: ContainerRuntime;
  /** GET until it answers `text` (a container's server takes a moment to listen), or the last answer. */
  serves(port: number, text: string): Promise<string | null>;
}

async function bed(t: KitTest, spec: RuntimeKitSpec): Promise<Bed> {
  const engine = await spec.engine(t);
  // The runtime reads no files: an empty root and state folder of the kit's own, to be sure.
  const dir = mkdtempSync(join(tmpdir(), 'meshp-kit-runtime-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const host = new Host({ root: dir, stateDir: join(dir, 'state'), ...engine.hostOptions }).use(engine.plugin);
  t.teardown(() => host.close());
  const runtime = await host.runtime();
  if (!runtime) throw new Error(`plugin ${engine.plugin.name} provided no container runtime`);
  const serves = async (port: number, text: string) => {
    let last: string | null = null;
    for (let i = 0; i < 100 && last !== text; i++) {
      last = await engine.get(port);
      if (last !== text) await new Promise((r) => setTimeout(r, 100));
    }
    return last;
  };
  return { ...engine, runtime, serves };
}

/** The engine's containers of one name. */
async function named(b: Bed, name: string) {
  return (await b.runtime.list()).filter((c) => c.name === name);
}

/** Registers one check as a subtest on the shared engine; a known bug makes it a todo. */
type Check = (id: RuntimeCheck, name: string, fn: (t: KitTest, b: Bed) => Promise<void>) => void;

/** The runtime provided through the host, and what it lists: an absent name inspects as null, a found container is listed as it is. */
function listingChecks(check: Check): void {
  check('provided', 'provided through the host; an absent container inspects as null', async (t, b) => {
    t.ok(Array.isArray(await b.runtime.list()), 'list() answers');
    t.equal(await b.runtime.inspect('kit-absent'), null, 'absent → null');
  });

  check('foreign', "a container the mesh did not make is listed as it is, without the mesh's labels", async (t, b) => {
    await b.foreign('kit-found', PORTS.foreign, 'found');
    t.equal(await b.serves(PORTS.foreign, 'found'), 'found', 'it serves');
    const [c] = await named(b, 'kit-found');
    t.ok(c, 'listed by its name, without a leading slash');
    t.equal(c?.state, 'running');
    t.notOk(
      Object.keys(c?.labels ?? {}).some((k) => k.startsWith('meshp.')),
      'no meshp labels',
    );
    t.ok(
      c?.ports.some((p) => p.hostPort === PORTS.foreign && p.containerPort === 80 && p.protocol === 'tcp'),
      'its published port',
    );
    t.ok(
      (await b.runtime.publishedPorts()).some((p) => p.container === 'kit-found' && p.hostPort === PORTS.foreign),
      'in publishedPorts()',
    );
  });
}

/** `ensure` of a spec: created, started and labelled; the same spec again changes nothing. */
function ensureChecks(check: Check): void {
  check('ensure', 'ensure creates and starts the container, labelled with the mark, its port published', async (t, b) => {
    const s = web(b.image, 'one');
    const mark = markOf(s);
    await b.runtime.ensure(s, mark);
    t.equal(await b.serves(PORTS.web, 'one'), 'one', 'it serves on the published port');
    const [c] = await named(b, s.name);
    t.equal(c?.state, 'running');
    t.equal(c?.image, b.image);
    t.same(
      [c?.labels[LABEL_MODULE], c?.labels[LABEL_SPEC_HASH], c?.labels[LABEL_NODE]],
      [mark.module, mark.specHash, mark.node],
      `labelled ${LABEL_MODULE}, ${LABEL_SPEC_HASH}, ${LABEL_NODE} from the mark`,
    );
    t.ok(
      c?.ports.some((p) => p.container === s.name && p.hostPort === PORTS.web && p.containerPort === 80),
      'its port listed',
    );
    t.ok(
      (await b.runtime.publishedPorts()).some((p) => p.container === s.name && p.hostPort === PORTS.web),
      'in publishedPorts()',
    );
    t.equal((await b.runtime.inspect(s.name))?.info.id, c?.id, 'inspect finds the same container');
  });

  check('idempotent', 'ensure of the same spec leaves the running container alone', async (t, b) => {
    const s = web(b.image, 'one');
    const before = (await b.runtime.inspect(s.name))?.info.id;
    await b.runtime.ensure(s, markOf(s));
    t.equal((await b.runtime.inspect(s.name))?.info.id, before, 'the same container');
  });
}

/** `ensure` of a changed spec: replaced, or rolled back when the replacement cannot start. */
function replacementChecks(check: Check): void {
  check('replace', 'ensure of a changed spec replaces the container, one of its name left', async (t, b) => {
    const s = web(b.image, 'two');
    const before = (await b.runtime.inspect(s.name))?.info.id;
    await b.runtime.ensure(s, markOf(s));
    const after = await named(b, s.name);
    t.equal(after.length, 1, 'one container of the name');
    t.not(after[0]?.id, before, 'another container');
    t.equal(after[0]?.labels[LABEL_SPEC_HASH], markOf(s).specHash, 'labelled with the new mark');
    t.equal(await b.serves(PORTS.web, 'two'), 'two', 'serving the new spec');
  });

  check('rollback', 'a replacement that cannot start is rolled back: the previous one runs again, the error names the plugin', async (t, b) => {
    await b.foreign('kit-holder', PORTS.taken, 'holder');
    t.equal(await b.serves(PORTS.taken, 'holder'), 'holder', 'the port is taken by a container of its own');
    const before = (await b.runtime.inspect('kit-web'))?.info.id;
    const s = web(b.image, 'three', PORTS.taken);
    const err = await b.runtime.ensure(s, markOf(s)).then(
      () => null,
      (e: unknown) => e,
    );
    t.ok(err, 'the replacement is refused');
    t.equal(isMeshpError(err) ? err.attribution?.plugin : String(err), b.plugin.name, `attributed to ${b.plugin.name}`);
    t.ok(isMeshpError(err) && err.oneLine().includes('at runtime.ensure'), `its line names the method: ${isMeshpError(err) ? err.oneLine() : String(err)}`);
    const after = await named(b, 'kit-web');
    t.same(
      after.map((c) => [c.id, c.state]),
      [[before, 'running']],
      'the previous container, running, alone under its name',
    );
    t.equal(await b.serves(PORTS.web, 'two'), 'two', 'and serving');
    t.equal(await b.serves(PORTS.taken, 'holder'), 'holder', "the holder's port is the holder's");
  });
}

/** `remove`: the container goes, again is no error, the found one is left. */
function removalChecks(check: Check): void {
  check('remove', 'remove takes the container; removing it again is no error; others are left', async (t, b) => {
    await b.runtime.remove('kit-web');
    t.same(await named(b, 'kit-web'), [], 'gone from list()');
    t.equal(await b.runtime.inspect('kit-web'), null, 'inspect → null');
    t.equal(await b.get(PORTS.web), null, 'nothing serves its port');
    await b.runtime.remove('kit-web');
    t.pass('removing an absent container is no error');
    t.equal((await named(b, 'kit-found'))[0]?.state, 'running', 'the found container still runs');
    t.equal(await b.serves(PORTS.foreign, 'found'), 'found', 'and serves');
  });
}

/** Runs every check of the runtime contract, in order, on one engine. */
export function runtimeConformance(t: KitTest, spec: RuntimeKitSpec): void {
  let made: Promise<Bed> | undefined;
  const engine = () => (made ??= bed(t, spec));
  const check: Check = (id, name, fn) => {
    const bug = spec.known?.[id];
    t.test(`runtime: ${name}`, bug ? { todo: `known bug: ${bug}` } : {}, async (t) => fn(t, await engine()));
  };
  listingChecks(check);
  ensureChecks(check);
  replacementChecks(check);
  removalChecks(check);
}

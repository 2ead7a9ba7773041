/**
 * Issue 33 item 8, with the real CLI in a namespace of the test's own and a Docker engine the test
 * starts (test/helpers/dockerd.ts):
 *  - no engine at the socket: genesis is refused MESHP_RUNTIME_UNAVAILABLE naming the socket it
 *    tried and `--docker-socket`, before anything is written;
 *  - the shipped catalogue names real images, the lab's stand-ins replace them with `--images`;
 *  - genesis's `next:` commands carry the flags it was given (the engine's socket, the root), and the
 *    agent started with exactly that command converges the machine: the foundation's containers are
 *    its own, not a machine in use.
 */
import t from 'tap';
import { existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { labAvailable } from '../helpers/netns.js';
import { LAB_IMAGES, startDockerd } from '../helpers/dockerd.js';
import { meshpIn } from '../helpers/cli.js';
import { NsProc } from '../helpers/lifecycle-lab.js';
import { workdir, writeJson } from '../helpers/grpc-procs.js';

if (!labAvailable()) {
  t.plan(0, 'needs root for network namespaces and a Docker engine');
  process.exit(0);
}

const CATALOGUE = join(import.meta.dirname, '../../examples/catalogue');
const dir = workdir(t, 'gen-engine');
const engine = await startDockerd(t, { tag: 'gen' });
const ns = engine.netns;
const root = join(dir, 'root');
mkdirSync(root);

t.test('the shipped catalogue names real images; the lab stand-ins name only its containers', async (t) => {
  const images = Object.fromEntries(
    readdirSync(CATALOGUE)
      .filter((f) => f.endsWith('.json'))
      .flatMap((f) => {
        const m = JSON.parse(readFileSync(join(CATALOGUE, f), 'utf8')) as { containers?: { name: string; image: string }[] };
        return (m.containers ?? []).map((c) => [c.name, c.image]);
      }),
  );
  t.same(images, { 'meshp-broker': 'rabbitmq:3', 'meshp-bus': 'nats:2', 'meshp-registry': 'registry:2', 'meshp-store': 'postgres:15', web: 'nginx:1' });
  const standIns = JSON.parse(readFileSync(LAB_IMAGES, 'utf8')) as Record<string, { image: string }>;
  t.same(Object.keys(standIns).sort(), Object.keys(images).sort(), 'a stand-in for every image');
});

t.test('no engine answering: refused naming the socket tried and --docker-socket; nothing written', async (t) => {
  const state = join(dir, 'refused');
  const socket = join(dir, 'no-engine.sock');
  const r = await meshpIn(ns, ['genesis', '--state', state, '--root', root, '--docker-socket', socket, '--private-interface', 'lo', '--node', 'm1', '--yes']);
  t.equal(r.code, 1, r.err);
  t.match(
    r.err,
    new RegExp(
      `^MESHP_RUNTIME_UNAVAILABLE: no container engine answers at ${socket} \\(--docker-socket\\) \\(.*\\); the foundation runs as containers: start a Docker engine, or give its socket with --docker-socket PATH`,
    ),
  );
  t.notOk(existsSync(join(state, 'controller.db')), 'nothing written');
});

t.test('an --images file that cannot be read, or names a container the catalogue does not have, is a usage error', async (t) => {
  const run = (file: string) =>
    meshpIn(ns, ['genesis', '--state', join(dir, 'x'), '--root', root, '--docker-socket', engine.socket, '--images', file, '--preview']);
  const [absent, stranger] = await Promise.all([
    run(join(dir, 'nope.json')),
    run(writeJson(dir, 'stranger.json', { 'meshp-cache': { image: 'lab/busybox:1' } })),
  ]);
  t.equal(absent.code, 2, absent.err);
  t.match(absent.err, /^MESHP_USAGE: --images .*nope\.json: not a readable JSON file/);
  t.equal(stranger.code, 2, stranger.err);
  t.match(stranger.err, /^MESHP_USAGE: --images .*stranger\.json: no container of the catalogue is named meshp-cache/);
});

t.test("genesis's next: commands carry its flags, and the agent they start converges the machine", async (t) => {
  const state = join(dir, 'ctl');
  const args = [
    'genesis',
    '--state',
    state,
    '--root',
    root,
    '--docker-socket',
    engine.socket,
    '--images',
    LAB_IMAGES,
    '--private-interface',
    'lo',
    '--node',
    'm1',
    '--port',
    'control=17443',
    '--yes',
    '--json',
  ];
  const g = await meshpIn(ns, args, 240_000);
  t.equal(g.code, 0, g.err);
  const out = JSON.parse(g.out) as { next: { controller: string[]; agent: string[] } };
  t.same(
    out.next.agent,
    ['meshp', 'agent', '--state', join(state, 'agent'), '--root', root, '--name', 'm1', '--docker-socket', engine.socket],
    'the agent is told the engine genesis raised the foundation on',
  );
  t.same(out.next.controller, ['meshp', 'controller', 'serve', '--state', state, '--listen', '0.0.0.0:17443']);
  const store = await engine.client().getContainer('meshp-store').inspect();
  t.equal(store.Config.Image, 'lab/busybox:1', 'the stand-in runs in place of postgres:15');
  t.same(Object.keys(store.HostConfig.PortBindings ?? {}), ['5432/tcp'], "on the shipped catalogue's container port");

  // The two commands as printed, the `meshp` word being this checkout's CLI.
  const controller = new NsProc(t, ns, out.next.controller.slice(1));
  await controller.waitFor((l) => l.msg === 'controller serving');
  const agent = new NsProc(t, ns, [...out.next.agent.slice(1), '--interval', '2']);
  const admin = ['--state', state, '--controller', '127.0.0.1:17443'];
  const deadline = Date.now() + 90_000;
  let node: { mode: string; status: string; statusDetail: string; lifecycle: { state: string; code?: string } | null } | undefined;
  for (;;) {
    const r = await meshpIn(ns, ['node', 'show', 'm1', '--json', ...admin]);
    node = r.code === 0 ? (JSON.parse(r.out) as { node: NonNullable<typeof node> }).node : undefined;
    if (node?.lifecycle?.state === 'converged' || node?.lifecycle?.state === 'refused' || Date.now() > deadline) break;
    await new Promise((res) => setTimeout(res, 500));
  }
  t.notMatch(node?.statusDetail ?? '', /MESHP_MACHINE_IN_USE/, "the foundation's own containers are not a machine in use");
  t.match(node, { mode: 'converged', lifecycle: { state: 'converged' } }, `converged by the agent next: started (${JSON.stringify(agent.lines.slice(-4))})`);
});

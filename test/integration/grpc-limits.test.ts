/**
 * Case 5 of issue 13 over real gRPC on 127.0.0.1: a node that declares endpoints over their bound
 * is refused at enrolment with a code (and its token is not burnt), and the nodes within bounds
 * converge as before: no snapshot ever grows past the message limit. Per connection, the controller
 * holds at most 4 Sync streams at once and takes at most 20 hellos a minute (MESHP_RATE_LIMITED).
 */
import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  Proc,
  tokenFor,
  nodeListAsync,
  startAgent,
  startController,
  waitUntil,
  workdir,
  nodes as listNodes,
  type ControllerProc,
} from '../helpers/grpc-procs.js';
import { RawAgent } from '../helpers/raw-agent.js';

/** A raw agent enrolled as `node`, and `k` Sync streams on its one connection, each challenged (held open, no hello). */
async function heldStreams(t: { teardown(fn: () => unknown): void }, ctl: ControllerProc, node: string, k: number) {
  const raw = new RawAgent(ctl);
  t.teardown(() => raw.link.close());
  await raw.enrol(await tokenFor(ctl), node);
  const streams = Array.from({ length: k }, () => {
    const ch = raw.link.sync();
    return {
      ch,
      challenged: new Promise<void>((resolve) => ch.onMessage((m) => 'challenge' in m && resolve())),
      closed: new Promise<unknown>((resolve) => ch.onClose(resolve)),
    };
  });
  await Promise.all(streams.map((s) => s.challenged));
  return { raw, streams };
}

const bloated = Array.from({ length: 40 }, (_, i) => `${'endpoint-'.repeat(20)}${i}.example:51820`);

t.test('endpoint bloat is refused at enrolment; the others converge', async (t) => {
  const dir = workdir(t, 'limits');
  const ctl = await startController(t, join(dir, 'ctl'));
  const token = await tokenFor(ctl, [], true);
  const base = join(dir, 'bloat');
  const args = [
    'agent',
    '--state',
    join(base, 'state'),
    '--controller',
    ctl.address,
    '--name',
    'bloat',
    '--root',
    join(base, 'root'),
    '--firewall',
    'none',
    '--docker-socket',
    join(base, 'absent.sock'),
    '--interval',
    '1',
    '--token',
    token,
    ...bloated.flatMap((e) => ['--endpoint', e]),
  ];
  const bloat = new Proc(t, args);
  const code = await Promise.race([bloat.exited, new Promise<string>((r) => setTimeout(() => r('still running'), 30_000))]);
  t.equal(code, 1, 'the agent stops with a refusal');
  t.match(bloat.stderr + JSON.stringify(bloat.lines), /MESHP_INPUT_TOO_LARGE: 40 endpoints are over the limit of 32/);
  t.same(
    (await nodeListAsync(ctl)).map((n) => n.name),
    [],
    'nothing joined',
  );
  const logged = await ctl.proc.waitFor((l) => l.msg === 'enrolment refused');
  t.equal(logged.code, 'MESHP_INPUT_TOO_LARGE', 'the controller logs the refusal with its code');

  // The same token still enrols a node within bounds, and a second node joins it; both converge.
  const a1 = startAgent(t, dir, 'a1', ctl.address, token);
  const a2 = startAgent(t, dir, 'a2', ctl.address, await tokenFor(ctl));
  for (const a of [a1, a2]) await a.proc.waitFor((l) => l.msg === 'applied' && l.snapshot === true, 60_000);
  await waitUntil('both nodes at gap 0', async () => {
    const nodes = await listNodes(ctl);
    return nodes.length === 2 && nodes.every((n) => n.gap === 0);
  });
  t.notOk(
    ctl.proc.lines.some((l) => l.msg === 'delta not sent: over the message limit'),
    'no delta held back',
  );

  // One connection (one link): four streams waiting for their hello are held, a fifth is refused.
  const { raw, streams: idle } = await heldStreams(t, ctl, 'conn1', 4);
  const fifth = raw.open();
  t.equal((await fifth.closed)?.code, 'MESHP_RATE_LIMITED', 'a fifth Sync stream at once on one connection is refused');
  const limited = await ctl.proc.waitFor((l) => l.msg === 'sync refused' && l.code === 'MESHP_RATE_LIMITED');
  t.match(String(limited.err), /Sync streams open at once on one connection/, 'and logged');
  for (const s of idle) s.ch.close();
  await Promise.all(idle.map((s) => s.closed));

  // Hellos on one connection (another link: the closed streams above may still count on theirs):
  // twenty a minute are answered, the next is refused.
  const hi = new RawAgent(ctl);
  t.teardown(() => hi.link.close());
  await hi.enrol(await tokenFor(ctl), 'conn2');
  let last: Awaited<ReturnType<RawAgent['open']>['closed']> | undefined;
  let answered = 0;
  for (let i = 0; i < 21; i++) {
    const mark = ctl.proc.lines.length;
    const s = hi.open();
    const opened = ctl.proc
      .waitFor((l) => l.msg === 'sync stream opened' && l.node === 'conn2', 30_000, mark)
      .then(
        () => 'opened' as const,
        () => 'not opened' as const,
      );
    const first = await Promise.race([opened, s.closed.then(() => 'closed' as const)]);
    if (first === 'opened') {
      answered++;
      s.ch.close();
    }
    last = await s.closed;
  }
  t.equal(answered, 20, 'twenty hellos on one connection are answered');
  t.equal(last?.code, 'MESHP_RATE_LIMITED', 'the twenty-first is refused');
  t.match(String(last?.message), /more than 20 hellos in 60 s on one connection/);
});

t.test('--streams-per-connection: a controller behind a multiplexing proxy holds that many streams on one connection, and no more', async (t) => {
  const dir = workdir(t, 'limits-k');
  const ctl = await startController(t, join(dir, 'ctl'), ['--streams-per-connection', '6']);
  const { raw, streams: held } = await heldStreams(t, ctl, 'k1', 6);
  t.pass('six Sync streams at once on one connection are each challenged');
  const seventh = raw.open();
  t.equal((await seventh.closed)?.code, 'MESHP_RATE_LIMITED', 'a seventh is refused');
  const limited = await ctl.proc.waitFor((l) => l.msg === 'sync refused' && l.code === 'MESHP_RATE_LIMITED');
  t.match(String(limited.err), /more than 6 Sync streams open at once on one connection/, 'and logged with the limit it was given');
  for (const s of held) s.ch.close();
  await Promise.all(held.map((s) => s.closed));

  // Not a whole number of at least one: the controller does not start, and says why.
  const bad = new Proc(t, ['controller', 'serve', '--state', join(dir, 'bad'), '--listen', '127.0.0.1:0', '--streams-per-connection', '0']);
  t.equal(await bad.exited, 2, 'a controller told 0 streams a connection does not start (a usage error)');
  t.match(bad.stderr, /MESHP_USAGE: --streams-per-connection must be a whole number of at least 1, not 0/);
  t.notOk(existsSync(join(dir, 'bad')), 'and made nothing: no state folder');
});

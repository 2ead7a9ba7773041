/**
 * The agent's link over several controller replicas (core/src/agent/failover.ts), over in-memory
 * links: which address an enrolment and a stream go to, when the agent sees a stream end (once per
 * round, so its backoff falls between rounds), and controller.json's two forms.
 */
import t from 'tap';
import { generateKeyPairSync, sign } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MeshpError, type EnrolInput, type TransportError } from '@meshp/core';
import { Agent, FailoverLink, type AgentLog } from '@meshp/core/agent';
import { Controller, MemoryStore } from '@meshp/controller';
import { CONTROLLER_FILE, controllerOf, readControllerFile, writeControllerFile } from '../../bin/src/remote/agent.js';
import { FakeLink } from '../helpers/grpc-fake-link.js';
import { bed } from '../helpers/host.js';
import { until } from '../helpers/budget.js';

const UNAVAILABLE: TransportError = { code: 'MESHP_UNAVAILABLE', message: 'connection refused' };
const answer = (input: EnrolInput) => ({ network: 'n', node: input.node, credential: 'cred', mode: 'converged' as const, addresses: [] });
const INPUT: EnrolInput = { token: 'T', nodeKey: 'k', node: 'a1', endpoints: [] };

function recorder() {
  const events: { msg: string; fields: Record<string, unknown> }[] = [];
  const log: AgentLog = {
    info: (fields, msg) => events.push({ msg, fields }),
    warn: (fields, msg) => events.push({ msg, fields }),
    error: (fields, msg) => events.push({ msg, fields }),
  };
  return { events, log };
}

/** Links A and B (and C): each refuses enrolment with `refuse[address]` when given. */
function replicas(names: string[], refuse: Record<string, MeshpError> = {}) {
  const links = Object.fromEntries(
    names.map((n) => [
      n,
      new FakeLink((input) => {
        if (refuse[n]) throw refuse[n];
        return answer(input);
      }),
    ]),
  );
  const { events, log } = recorder();
  const link = new FailoverLink(
    names.map((address) => ({ address, link: links[address]! })),
    log,
  );
  return { links, link, events };
}

t.test('enrolment moves past an unavailable controller to the next, in order, and streams start where it was answered', async (t) => {
  const r = replicas(['A', 'B', 'C'], { A: new MeshpError('MESHP_UNAVAILABLE', 'connection refused') });
  const e = await r.link.enrol(INPUT);
  t.equal(e.credential, 'cred');
  t.same(
    ['A', 'B', 'C'].map((n) => r.links[n]!.enrolments.length),
    [1, 1, 0],
    'A asked, then B; C never',
  );
  t.equal(r.link.address, 'B');
  r.link.sync();
  t.same(
    ['A', 'B'].map((n) => r.links[n]!.channels.length),
    [0, 1],
    'the stream goes to B',
  );
  t.match(
    r.events.find((x) => x.msg === 'enrolment answered'),
    { fields: { controller: 'B' } },
  );
});

t.test('a coded refusal of the enrolment is final: the token is never shown to the next controller', async (t) => {
  for (const code of ['MESHP_TOKEN_INVALID', 'MESHP_AUTH_FAILED', 'MESHP_TLS_PIN'] as const) {
    const r = replicas(['A', 'B'], { A: new MeshpError(code, 'no') });
    await t.rejects(r.link.enrol(INPUT), { code }, `${code} comes back as itself`);
    t.equal(r.links.B!.enrolments.length, 0, `after ${code}, B saw no Enrol`);
  }
});

t.test('every controller unavailable: one round, each asked once, and the unavailable error for the agent to back off on', async (t) => {
  const down = new MeshpError('MESHP_UNAVAILABLE', 'down');
  const r = replicas(['A', 'B'], { A: down, B: down });
  await t.rejects(r.link.enrol(INPUT), { code: 'MESHP_UNAVAILABLE' });
  t.same([r.links.A!.enrolments.length, r.links.B!.enrolments.length], [1, 1]);
  t.equal(r.link.address, 'A', 'the next round starts at the first again');
});

t.test('a stream refused before the controller spoke goes on to the next address in the same channel: the agent sees no end', async (t) => {
  const r = replicas(['A', 'B']);
  const ch = r.link.sync();
  const ends: (TransportError | undefined)[] = [];
  const got: unknown[] = [];
  ch.onClose((e) => ends.push(e));
  ch.onMessage((m) => got.push(m));
  r.links.A!.channels[0]!.close(UNAVAILABLE);
  t.equal(r.links.B!.channels.length, 1, 'B asked at once');
  t.same(ends, [], 'no end told');
  r.links.B!.channels[0]!.deliver({ challenge: new Uint8Array([1]) });
  t.equal(got.length, 1, "B's challenge reaches the agent");
  ch.send({ ack: { appliedVersion: 1, stateHash: 'h' } });
  t.equal(r.links.B!.channels[0]!.sent.length, 1, 'and what the agent sends goes to B');
  t.match(
    r.events.find((x) => x.msg === 'controller unavailable; trying the next'),
    { fields: { controller: 'A', next: 'B', code: 'MESHP_UNAVAILABLE' } },
  );
  t.match(
    r.events.find((x) => x.msg === 'on controller'),
    { fields: { controller: 'B' } },
  );
});

t.test('a round in which every address failed ends the stream once, and the next stream starts where the round left off', async (t) => {
  const r = replicas(['A', 'B', 'C']);
  const ch = r.link.sync();
  const ends: (TransportError | undefined)[] = [];
  ch.onClose((e) => ends.push(e));
  r.links.A!.channels[0]!.close(UNAVAILABLE);
  r.links.B!.channels[0]!.close({ code: 'MESHP_TLS_PIN', message: 'another certificate' });
  t.same(ends, [], 'two of three tried: not yet');
  r.links.C!.channels[0]!.close(UNAVAILABLE);
  t.same(ends, [UNAVAILABLE], "one end, with the round's last error");
  t.same(
    ['A', 'B', 'C'].map((n) => r.links[n]!.channels.length),
    [1, 1, 1],
    'each address tried once',
  );
  r.link.sync();
  t.equal(r.links.A!.channels.length, 2, 'the next round starts at A again');
});

t.test('an open stream lost as unavailable ends for the agent, and the next stream goes to the next address', async (t) => {
  const r = replicas(['A', 'B']);
  const ch = r.link.sync();
  const ends: (TransportError | undefined)[] = [];
  ch.onClose((e) => ends.push(e));
  r.links.A!.channels[0]!.deliver({ challenge: new Uint8Array([1]) });
  r.links.A!.channels[0]!.close(UNAVAILABLE);
  t.same(ends, [UNAVAILABLE], 'the agent sees its stream end (its hello and acks were for A)');
  t.equal(r.links.B!.channels.length, 0, 'B is not asked behind its back');
  r.link.sync();
  t.equal(r.links.B!.channels.length, 1, 'the next stream goes to B');
  r.links.B!.channels[0]!.deliver({ challenge: new Uint8Array([1]) });
  t.match(
    r.events.filter((x) => x.msg === 'on controller').map((x) => x.fields),
    [{ controller: 'A' }, { controller: 'B', from: 'A' }],
    'each move logged with the controller it is on now',
  );
});

t.test('an open stream ended with a code stays on its controller; the agent closing its stream moves nowhere', async (t) => {
  const r = replicas(['A', 'B']);
  r.link.sync();
  r.links.A!.channels[0]!.deliver({ challenge: new Uint8Array([1]) });
  r.links.A!.channels[0]!.close({ code: 'MESHP_NODE_REVOKED', message: 'removed' });
  r.link.sync();
  t.same([r.links.A!.channels.length, r.links.B!.channels.length], [2, 0], 'the next stream goes to A again');
  const ch2 = r.link.sync();
  const ends: (TransportError | undefined)[] = [];
  ch2.onClose((e) => ends.push(e));
  ch2.close();
  t.same(ends, [undefined], 'closed by the agent: ended, no error');
  t.same([r.links.A!.channels.length, r.links.B!.channels.length], [3, 0], 'and not tried elsewhere');
  r.link.close();
  t.ok(r.links.A!.closed && r.links.B!.closed, 'closing the link closes every address');
});

t.test('the agent on two replicas: moves to B when its stream to A is lost, and backs off once per round, not per address', async (t) => {
  const b = bed(t, 'auto');
  const controller = new Controller(new MemoryStore());
  controller.createNetwork('n');
  const join_ = (input: EnrolInput) => {
    controller.join('n', { id: input.node, nodeKey: input.nodeKey });
    return answer(input);
  };
  const A = new FakeLink(join_);
  const B = new FakeLink(join_);
  const { events, log } = recorder();
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  const agent = new Agent(
    b.host(),
    new FailoverLink(
      [
        { address: 'A', link: A },
        { address: 'B', link: B },
      ],
      log,
    ),
    {
      node: 'a1',
      token: 'T',
      nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
      sign: (p) => sign(null, p, privateKey),
      intervalMs: 60_000,
      backoff: { initialMs: 10, maxMs: 50 },
      log,
    },
  );
  t.teardown(() => agent.stop());
  await agent.start();
  const serve = async (ch: ReturnType<FakeLink['sync']>) => {
    ch.deliver({ challenge: new Uint8Array([1, 2, 3]) });
    const [hello] = await ch.waitFor('hello');
    controller.hello('n', 'a1', hello!.appliedVersion, hello!.stateHash);
    const d = controller.deltaFor('n', 'a1');
    if (d) ch.deliver({ delta: d });
  };
  const onA = await A.nextChannel(1);
  await serve(onA);
  const [ack] = await onA.waitFor('ack');
  controller.ack('n', 'a1', ack!.appliedVersion, ack!.stateHash);
  onA.close(UNAVAILABLE);

  const onB = await B.nextChannel(1);
  await serve(onB);
  t.equal((await onB.waitFor('hello'))[0]!.appliedVersion, ack!.appliedVersion, 'the hello on B says the version applied on A');
  t.match(
    events.filter((x) => x.msg === 'on controller').map((x) => x.fields.controller),
    ['A', 'B'],
    'the log names the controller it is on now',
  );

  // B lost too, and A still down: one round (A, then B at once), then one backoff.
  const ended = () => events.filter((x) => x.msg === 'stream ended; reconnecting').length;
  onB.close(UNAVAILABLE);
  await until('the agent to back off after losing B', () => ended() === 2, 10);
  const roundA = await A.nextChannel(2);
  roundA.close(UNAVAILABLE);
  const roundB = await B.nextChannel(2);
  t.equal(ended(), 2, 'no backoff between A and B of one round');
  roundB.close(UNAVAILABLE);
  await until('one backoff after the round', () => ended() === 3, 10);
  const again = await A.nextChannel(3);
  t.equal(A.channels.length + B.channels.length, 5, 'then a new round from A');
  await serve(again);
  await again.waitFor('hello');
});

t.test(
  'a stream lost as unavailable after it was open longer than the longest delay starts the next round at the shortest; one lost soon after opening backs off further',
  async (t) => {
    const b = bed(t, 'auto');
    const link = new FakeLink(answer);
    const { events, log } = recorder();
    const { privateKey, publicKey } = generateKeyPairSync('ed25519');
    // random 1: every delay is its ceiling, 10, 20, 40, 80 ms.
    const agent = new Agent(b.host(), link, {
      node: 'a1',
      token: 'T',
      nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'),
      sign: (p) => sign(null, p, privateKey),
      intervalMs: 60_000,
      backoff: { initialMs: 10, maxMs: 80, random: () => 1 },
      log,
    });
    t.teardown(() => agent.stop());
    await agent.start();
    const delays = () => events.filter((x) => x.msg === 'stream ended; reconnecting').map((x) => x.fields.retryMs);
    for (let n = 1; n <= 3; n++) (await link.nextChannel(n)).close(UNAVAILABLE);
    const quick = await link.nextChannel(4);
    quick.deliver({ challenge: new Uint8Array([1]) });
    await quick.waitFor('hello');
    quick.close(UNAVAILABLE);
    const settled = await link.nextChannel(5);
    settled.deliver({ challenge: new Uint8Array([2]) });
    await settled.waitFor('hello');
    await new Promise((r) => setTimeout(r, 150));
    settled.close(UNAVAILABLE);
    await link.nextChannel(6);
    t.same(delays(), [10, 20, 40, 80, 10], 'never reached: 10, 20, 40; open a moment: 80; open longer than 80 ms: 10 again');
  },
);

t.test('controller.json: the old single-address form still loads; the list is kept, with the first address beside it', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-failover-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, CONTROLLER_FILE);
  writeFileSync(file, JSON.stringify({ address: '10.0.0.1:7443', fingerprint: 'ab:cd' }));
  t.same(readControllerFile(file), { addresses: ['10.0.0.1:7443'], fingerprint: 'ab:cd' });
  t.same(controllerOf({ state: dir }), { addresses: ['10.0.0.1:7443'], fingerprint: 'ab:cd' }, 'an agent upgraded in place starts on what it kept');
  t.same(
    controllerOf({ state: dir, controller: ['10.0.0.2:7443', '10.0.0.3:7443', '10.0.0.2:7443'] }).addresses,
    ['10.0.0.2:7443', '10.0.0.3:7443'],
    '--controller replaces what was kept, each once',
  );
  writeControllerFile(file, { addresses: ['10.0.0.2:7443', '[fd00::1]:7443'], fingerprint: 'ab:cd' });
  t.same(JSON.parse(readFileSync(file, 'utf8')), { address: '10.0.0.2:7443', addresses: ['10.0.0.2:7443', '[fd00::1]:7443'], fingerprint: 'ab:cd' });
  t.same(controllerOf({ state: dir }).addresses, ['10.0.0.2:7443', '[fd00::1]:7443']);
  t.throws(() => controllerOf({ state: dir, controller: ['10.0.0.2'] }), { code: 'MESHP_USAGE' }, 'an address without a port is a usage error');
  rmSync(file);
  t.throws(() => controllerOf({ state: dir, controller: [] }), { code: 'MESHP_USAGE' }, 'not enrolled: no pin');
});

/** The agent loop's rules, over an in-memory link with a real Controller behind it. */
import t from 'tap';
import type { Subtest } from '../helpers/tap-types.js';
import { createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PLUGIN_API_VERSION, type FirewallDriver, type Plugin } from '@meshp/core';
import type { Host } from '@meshp/core/host';
import { Agent, challengePayload, type AgentLog } from '@meshp/core/agent';
import { Controller, MemoryStore } from '@meshp/controller';
import { bed } from '../helpers/host.js';
import { FakeLink, type FakeChannel } from '../helpers/grpc-fake-link.js';
import { until } from '../helpers/budget.js';
import sinon from 'sinon';
import { MeshpError } from '@meshp/core';
import { LEFT_KEY } from '@meshp/core/agent';

const NET = 'n';

function keys() {
  const { privateKey, publicKey } = generateKeyPairSync('ed25519');
  return { nodeKey: publicKey.export({ type: 'spki', format: 'der' }).toString('base64'), sign: (p: Uint8Array) => sign(null, p, privateKey) };
}

function world(t: Subtest, extra: Plugin[] = []) {
  const b = bed(t, 'auto');
  const controller = new Controller(new MemoryStore());
  controller.createNetwork(NET);
  controller.defineModule(NET, { name: 'web', files: [{ path: '/etc/web.conf', content: 'one\n' }] });
  const k = keys();
  const link = new FakeLink((input) => {
    controller.join(NET, { id: input.node, nodeKey: input.nodeKey });
    return { network: NET, node: input.node, credential: 'cred', mode: 'converged', addresses: [] };
  });
  const events: { msg: string; fields: Record<string, unknown> }[] = [];
  const log: AgentLog = {
    info: (fields, msg) => events.push({ msg, fields }),
    warn: (fields, msg) => events.push({ msg, fields }),
    error: (fields, msg) => events.push({ msg, fields }),
  };
  const agents: Agent[] = [];
  const hosts: Host[] = [];
  t.teardown(async () => {
    for (const a of agents) await a.stop();
  });
  const agent = (options: { token?: string; intervalMs?: number } = {}) => {
    const host = b.host(extra);
    hosts.push(host);
    const a = new Agent(host, link, {
      node: 'a1',
      token: options.token,
      nodeKey: k.nodeKey,
      sign: k.sign,
      intervalMs: options.intervalMs ?? 60_000,
      backoff: { initialMs: 10, maxMs: 50 },
      log,
    });
    agents.push(a);
    return a;
  };
  /** Plays the controller on a stream: the challenge, then whatever it has for the node. */
  const serve = async (ch: FakeChannel) => {
    ch.deliver({ challenge: new Uint8Array([1, 2, 3]) });
    const [hello] = await ch.waitFor('hello');
    controller.hello(NET, 'a1', hello!.appliedVersion, hello!.stateHash);
    const d = controller.deltaFor(NET, 'a1');
    if (d) ch.deliver({ delta: d });
    return hello!;
  };
  return { b, controller, link, k, events, agent, serve, hosts };
}

t.test('the hello carries the applied version, the state hash, and a signature over the challenge by the node key', async (t) => {
  const w = world(t);
  await w.agent({ token: 'T' }).start();
  t.equal(w.link.enrolments[0]?.token, 'T');
  const hello = await w.serve(await w.link.nextChannel(1));
  t.equal(hello.appliedVersion, 0);
  t.equal(hello.credential, 'cred');
  const key = createPublicKey({ key: Buffer.from(w.k.nodeKey, 'base64'), format: 'der', type: 'spki' });
  t.ok(verify(null, challengePayload('a1', new Uint8Array([1, 2, 3])), key, hello.signature), 'signed by the enrolled key');
  t.notOk(verify(null, challengePayload('a2', new Uint8Array([1, 2, 3])), key, hello.signature), 'and bound to the node name');
});

t.test('a delta is applied, reconciled, persisted and then acked with the version and hash the controller expects', async (t) => {
  const w = world(t);
  await w.agent({ token: 'T' }).start();
  const ch = await w.link.nextChannel(1);
  await w.serve(ch);
  const [snapAck] = await ch.waitFor('ack');
  t.ok(w.controller.ack(NET, 'a1', snapAck!.appliedVersion, snapAck!.stateHash).accepted, 'the snapshot ack matches');
  w.controller.assignModule(NET, 'a1', 'web');
  ch.deliver({ delta: w.controller.deltaFor(NET, 'a1')! });
  const acks = await ch.waitFor('ack', 2);
  t.ok(w.controller.ack(NET, 'a1', acks[1]!.appliedVersion, acks[1]!.stateHash).accepted, 'the delta ack matches');
  t.equal(readFileSync(join(w.b.root, 'etc/web.conf'), 'utf8'), 'one\n', 'the declaration reached the reconciler before the ack');
  const reports = await ch.waitFor('report');
  t.equal(reports.at(-1)!.resources[0]?.state, 'created');
  t.equal(w.controller.listNodes(NET)[0]!.gap, 0);
});

t.test('a delta that changes no fact of the host is answered with its ack alone: no report before or after it', async (t) => {
  const w = world(t);
  await w.agent({ token: 'T' }).start();
  const ch = await w.link.nextChannel(1);
  await w.serve(ch);
  const [snapAck] = await ch.waitFor('ack');
  w.controller.ack(NET, 'a1', snapAck!.appliedVersion, snapAck!.stateHash);
  await ch.waitFor('report');
  const mark = ch.sent.length;
  w.controller.setComponent(NET, 'dns', { nameservers: ['10.9.9.9'], searchDomains: [], records: [], domain: '', splits: [] });
  ch.deliver({ delta: w.controller.deltaFor(NET, 'a1')! });
  const acks = await ch.waitFor('ack', 2);
  t.ok(w.controller.ack(NET, 'a1', acks[1]!.appliedVersion, acks[1]!.stateHash).accepted, 'acked with the hash expected');
  await new Promise((r) => setTimeout(r, 200));
  t.same(
    ch.sent.slice(mark).map((m) => Object.keys(m)[0]),
    ['ack'],
    'one message for the delta: its ack (not report, ack, report)',
  );
  t.equal(w.controller.listNodes(NET)[0]!.gap, 0);

  // A change of the host's facts (a module's file written) is reported, once, before the ack.
  w.controller.assignModule(NET, 'a1', 'web');
  const mark2 = ch.sent.length;
  ch.deliver({ delta: w.controller.deltaFor(NET, 'a1')! });
  await ch.waitFor('ack', 3);
  await new Promise((r) => setTimeout(r, 200));
  t.same(
    ch.sent.slice(mark2).map((m) => Object.keys(m)[0]),
    ['report', 'ack'],
    'facts changed: one report, then the ack',
  );
});

t.test('an agent restarted resumes from its persisted view without a new token', async (t) => {
  const w = world(t);
  const first = w.agent({ token: 'T' });
  await first.start();
  const ch = await w.link.nextChannel(1);
  await w.serve(ch);
  const [ack] = await ch.waitFor('ack');
  await first.stop();
  t.ok(w.link.closed, 'stop closes the link');
  const second = w.agent();
  await second.start();
  t.equal(w.link.enrolments.length, 1, 'enrolled once');
  const ch2 = await w.link.nextChannel(2);
  ch2.deliver({ challenge: new Uint8Array([9]) });
  const [hello] = await ch2.waitFor('hello');
  t.same({ v: hello!.appliedVersion, h: hello!.stateHash }, { v: ack!.appliedVersion, h: ack!.stateHash }, 'the hello says where it was');
  t.same(
    second.applier.recent.map((d) => d.toVersion),
    first.applier.recent.map((d) => d.toVersion),
    'the last deltas applied come back from the host store',
  );
  t.ok(second.applier.recent.length > 0);
});

t.test('a delta that does not follow the applied version is refused, nothing applied, and a snapshot asked for', async (t) => {
  const w = world(t);
  const a = w.agent({ token: 'T' });
  await a.start();
  const ch = await w.link.nextChannel(1);
  await w.serve(ch);
  await ch.waitFor('ack');
  const before = a.applier.view.hash();
  const version = a.applier.appliedVersion;
  ch.deliver({ delta: { fromVersion: version + 5, toVersion: version + 6, upsertPeers: [], removePeers: [], network: NET } });
  const [resync] = await ch.waitFor('resync');
  t.equal(resync!.appliedVersion, version);
  t.match(resync!.detail, /MESHP_DELTA_GAP/);
  t.equal(a.applier.view.hash(), before, 'the view is untouched');
  t.equal(ch.of('ack').length, 1, 'nothing acked');
});

t.test('the agent reconnects after its stream ends, and says hello again', async (t) => {
  const w = world(t);
  await w.agent({ token: 'T' }).start();
  const ch = await w.link.nextChannel(1);
  await w.serve(ch);
  await ch.waitFor('ack');
  ch.close({ code: 'MESHP_UNAVAILABLE', message: 'gone' });
  const ch2 = await w.link.nextChannel(2);
  const hello = await w.serve(ch2);
  t.ok(hello.appliedVersion > 0, 'resumes from its applied version');
  t.ok(w.events.some((e) => e.msg === 'stream ended; reconnecting' && e.fields.code === 'MESHP_UNAVAILABLE'));
});

t.test('the agent reconciles on the timer and when the firewall watch fires', async (t) => {
  let fire: (() => void) | null = null;
  let watchClosed = false;
  const driver: FirewallDriver = {
    kind: 'fake',
    describe: async () => ({ kind: 'fake', manager: 'test', active: false, tables: [], summary: [] }),
    openings: async () => [],
    ensure: async () => ({ added: [], removed: [] }),
    loadDerived: async () => {},
    unloadDerived: async () => {},
    retire: async () => ({}),
    reenable: async () => {},
    watch: (cb) => {
      fire = cb;
      return { close: () => void (watchClosed = true) };
    },
  };
  const plugin: Plugin = {
    name: 'firewall-fake',
    apiVersion: PLUGIN_API_VERSION,
    apply: (host) =>
      host.hooks.firewall.tapPromise(
        'firewall-fake',
        async (probe) => void probe.seen.push({ kind: 'fake', active: false, summary: 'idle', by: 'firewall-fake', driver }),
      ),
  };
  const w = world(t, [plugin]);
  const a = w.agent({ token: 'T', intervalMs: 100 });
  await a.start();
  const ch = await w.link.nextChannel(1);
  w.controller.assignModule(NET, 'a1', 'web');
  await w.serve(ch);
  await ch.waitFor('ack');
  const reconciled = (reason: string) => w.events.filter((e) => e.msg === 'reconciled' && e.fields.reason === reason).length;
  t.ok(reconciled('delta') >= 1, 'on the delta');
  // Waited for, not slept on: a busy machine delays timers, it does not make them fire early.
  t.ok(await until('two timer reconciles', () => reconciled('timer') >= 2, 20, 20), `on the timer (${reconciled('timer')})`);
  t.ok(fire, 'the agent watches the firewall');
  fire!();
  t.ok(await until('a reconcile for the reload', () => reconciled('firewall') + reconciled('again') >= 1, 20, 20), 'when the firewall was reloaded');
  await a.stop();
  t.ok(watchClosed, 'stop closes the watch');
  const after = w.events.length;
  await new Promise((r) => setTimeout(r, 250));
  t.equal(w.events.filter((e) => e.msg === 'reconciled').length, w.events.slice(0, after).filter((e) => e.msg === 'reconciled').length, 'and the timer');
  t.ok(existsSync(join(w.b.root, 'etc/web.conf')));
});

t.test('a state store that cannot be read refuses the reconcile, says so to the controller, and the agent goes on', async (t) => {
  const w = world(t);
  await w.agent({ token: 'T' }).start();
  const ch = await w.link.nextChannel(1);
  await w.serve(ch);
  const [snapAck] = await ch.waitFor('ack');
  t.ok(w.controller.ack(NET, 'a1', snapAck!.appliedVersion, snapAck!.stateHash).accepted);
  const store = await w.hosts[0]!.state();
  const read = store.getValue.bind(store);
  // Fault injection: the first read of the reconcile finds a damaged page.
  const stub = sinon.stub(store, 'getValue').callsFake(async <T>(name: string): Promise<T | null> => {
    if (name === LEFT_KEY && stub.callCount === 1) throw new MeshpError('MESHP_STATE_CORRUPT', '/state/host.db is damaged (quick_check: page 4)');
    return read<T>(name);
  });
  t.teardown(() => stub.restore());
  w.controller.assignModule(NET, 'a1', 'web');
  ch.deliver({ delta: w.controller.deltaFor(NET, 'a1')! });
  const refused = await until('a refused reconcile reported', () => ch.sent.find((m) => 'report' in m && m.report.reconcile?.result === 'refused'));
  t.equal(refused && 'report' in refused ? refused.report.reconcile?.code : '', 'MESHP_STATE_CORRUPT', 'with the code of the store');
  const acks = await ch.waitFor('ack', 2);
  t.ok(w.controller.ack(NET, 'a1', acks[1]!.appliedVersion, acks[1]!.stateHash).accepted, 'the delta was still applied and acked: the agent goes on');
});

/**
 * Issue 28 (ADR 0041): node credentials that expire, renewals, and a node's tunnel key rotated,
 * against a real controller over gRPC on 127.0.0.1 and real agents as processes (a hand-driven agent
 * for the rekey: a tunnel needs a namespace, the lab test does it over WireGuard). An expired node is
 * refused at its hello with MESHP_NODE_EXPIRED, shown expired, and dropped by its peers in one delta
 * (their views, read from each agent's own store) while it stays a member; renewed by the admin it is
 * back in one delta without a token; an agent renews its own credential before it expires (a short
 * node lifetime); a rekey reaches the peers as one delta; a controller restart keeps every expiry.
 */
import t from 'tap';
import { join } from 'node:path';
import type { Peer } from '@meshp/core';
import { SqliteHostStore } from '@meshp/state-sqlite';
import { generatePrivateKey, publicKeyOf } from '@meshp/tunnel-wireguard';
import {
  meshpAsync,
  startAgent,
  startController,
  tokenFor,
  waitUntil,
  workdir,
  writeJson,
  type AgentProc,
  type ControllerProc,
} from '../helpers/grpc-procs.js';
import { heldViews, settled } from '../helpers/policy-views.js';
import { RawAgent } from '../helpers/raw-agent.js';
import { postgresMissing, startPostgres } from '../helpers/postgres.js';

interface NodeJson {
  name: string;
  status: string;
  expired: boolean;
  expiresAt: string | null;
  expiredAt: string | null;
  tunnelKey: string | null;
  connected: boolean;
}

interface Entry {
  actor: string;
  method: string;
  node: string | null;
  summary: string;
}

const DAY = 86_400_000;

/** The node's applied versions, from the admin API (connected too). */
async function live(ctl: ControllerProc) {
  const r = await (await ctl.admin!()).call('listNodes', { network: 'default' });
  return new Map(r.nodes.map((n) => [n.name, { applied: Number(n.appliedVersion), connected: n.connected, status: n.status }]));
}

/** The peers each agent holds, from its own store. */
async function peersOf(agents: AgentProc[]): Promise<Record<string, string[]>> {
  return (await heldViews(agents)).peers;
}

/** The peer as the agent's own store holds it. */
async function heldPeer(a: AgentProc, id: string): Promise<Peer | undefined> {
  const store = new SqliteHostStore(a.state);
  try {
    return ((await store.loadView())?.upsertPeers as Peer[] | undefined)?.find((p) => p.id === id);
  } finally {
    await store.close();
  }
}

/** The 'applied' log lines of the agent from index `from`: each delta it applied. */
const appliedSince = (a: AgentProc, from: number) => a.proc.applied(from).map((l) => [Number(l.fromVersion), Number(l.toVersion)]);

t.test('a node expires, is refused and dropped by its peers in one delta, is renewed without a token; agents renew; rekey is one delta', async (t) => {
  const dir = workdir(t, 'nodeexp');
  let ctl = await startController(t, join(dir, 'ctl'));
  const cli = (...args: string[]) => meshpAsync(...args, '--controller', ctl.address, '--state', ctl.state);
  const json = async <T>(...args: string[]): Promise<T> => {
    const r = await cli(...args, '--json');
    if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
    return JSON.parse(r.out) as T;
  };
  const list = async () => new Map((await json<{ nodes: NodeJson[] }>('node', 'list')).nodes.map((n) => [n.name, n]));
  t.equal((await cli('policy', 'set', writeJson(dir, 'policy.json', { rules: [{ from: 'web', to: 'web' }] }), '--yes')).code, 0);

  t.same(await json('network', 'lifetime'), { network: 'default', seconds: 180 * 86400, default: true }, 'the default node lifetime is 180 days');

  const agents: AgentProc[] = [];
  for (const name of ['a1', 'a2', 'a3']) agents.push(startAgent(t, dir, name, ctl.address, await tokenFor(ctl, ['web'])));
  const [a1, a2, a3] = agents as [AgentProc, AgentProc, AgentProc];
  const v0 = await settled(ctl, 3);
  t.same(await peersOf(agents), { a1: ['a2', 'a3'], a2: ['a1', 'a3'], a3: ['a1', 'a2'] }, 'every agent holds the others');
  for (const n of (await list()).values()) {
    t.equal(n.expired, false, `${n.name} is not expired`);
    t.ok(Math.abs(Date.parse(n.expiresAt!) - (Date.now() + 180 * DAY)) < 10 * 60_000, `${n.name} expires 180 days after its enrolment`);
  }

  // Expire: previewed (nothing changed), then made; its peers drop it in one delta, it stays a member.
  const preview = await json<{ preview: boolean; peers: string[]; unchanged: boolean }>('node', 'expire', 'a3', '--preview');
  t.same([preview.preview, preview.peers, preview.unchanged], [true, ['a1', 'a2'], false], 'the preview names the peers that drop it');
  t.match((await cli('node', 'expire', 'a3')).err, /MESHP_CONFIRM_NEEDED/, 'off a terminal, without --yes: asked for, nothing changed');
  t.equal((await live(ctl)).get('a1')!.applied, v0, 'the preview changed nothing');
  const from = { a1: a1.proc.lines.length, a2: a2.proc.lines.length, a3: a3.proc.lines.length };
  const expired = await json<{ stateVersion: number; peers: string[]; node: NodeJson }>('node', 'expire', 'a3', '--yes');
  t.equal(expired.stateVersion, v0 + 1, 'one version');
  t.equal(expired.node.expired, true);
  await waitUntil('a1 and a2 applied the expiry', async () => {
    const l = await live(ctl);
    return l.get('a1')!.applied >= v0 + 1 && l.get('a2')!.applied >= v0 + 1;
  });
  t.same(await peersOf([a1, a2]), { a1: ['a2'], a2: ['a1'] }, "a3 is out of its peers' views (their filter and allowed IPs drop it)");
  t.same(appliedSince(a1, from.a1), [[v0, v0 + 1]], 'a1 got it in one delta');
  t.same(appliedSince(a2, from.a2), [[v0, v0 + 1]], 'a2 got it in one delta');
  const removal = a1.proc.applied(from.a1)[0]!;
  t.same([removal.removed, removal.unscoped], [1, 0], 'removed for traffic, not unscoped into a grace');
  const shown = await list();
  t.same([shown.get('a3')!.status, shown.get('a3')!.expired, shown.size], ['expired', true, 3], 'node list shows it expired; it is still a member');
  t.match((await cli('node', 'list')).out, /a3\s+EXPIRED/, 'the table says EXPIRED');
  t.match((await cli('node', 'show', 'a3')).out, /credential: expired \S+ \(meshp node renew a3\)/, 'node show says so');
  t.match((await cli('node', 'expire', 'a3', '--yes')).out, /a3 is expired already .*: nothing changed/, 'expired again: nothing changed');

  // Its agent is refused with the code, at its stream and at each hello after, and keeps trying (it does not leave).
  await a3.proc.waitFor((l) => l.msg === 'stream ended; reconnecting' && l.code === 'MESHP_NODE_EXPIRED', 30_000, from.a3);
  await ctl.proc.waitFor((l) => l.msg === 'sync refused' && l.code === 'MESHP_NODE_EXPIRED' && l.node === 'a3' && /expired at/.test(String(l.err)), 30_000);
  const refusedHellos = () => a3.proc.lines.slice(from.a3).filter((l) => l.msg === 'stream ended; reconnecting' && l.code === 'MESHP_NODE_EXPIRED').length;
  await waitUntil('a3 refused again at a new hello', () => refusedHellos() >= 2, 60_000);
  t.ok(a3.proc.alive, 'the expired agent keeps running, trying again');

  // Renew: back in its peers' views in one delta, without a token; its agent's next hello is taken.
  const renewPreview = await json<{ peers: string[] }>('node', 'renew', 'a3', '--preview');
  t.same(renewPreview.peers, ['a1', 'a2'], 'the renewal preview names the peers that get it back');
  const from2 = { a1: a1.proc.lines.length, a2: a2.proc.lines.length };
  const renewed = await json<{ stateVersion: number; expiresAt: string; node: NodeJson }>('node', 'renew', 'a3', '--yes');
  t.equal(renewed.stateVersion, v0 + 2, 'one version');
  t.ok(Math.abs(Date.parse(renewed.expiresAt) - (Date.now() + 180 * DAY)) < 10 * 60_000, "renewed for the network's node lifetime");
  await waitUntil(
    'a3 back and connected',
    async () => {
      const l = await live(ctl);
      return l.get('a1')!.applied >= v0 + 2 && l.get('a2')!.applied >= v0 + 2 && l.get('a3')!.connected;
    },
    60_000,
  );
  t.same(await peersOf(agents), { a1: ['a2', 'a3'], a2: ['a1', 'a3'], a3: ['a1', 'a2'] }, 'every agent holds the others again');
  t.same(appliedSince(a1, from2.a1), [[v0 + 1, v0 + 2]], 'a1 got it back in one delta');
  t.same(appliedSince(a2, from2.a2), [[v0 + 1, v0 + 2]], 'a2 got it back in one delta');
  t.equal((await list()).get('a3')!.expired, false);

  // A controller restart keeps an expiry made and one renewed.
  await json('node', 'expire', 'a1', '--yes');
  const before = await list();
  ctl.proc.kill('SIGTERM');
  await ctl.proc.exited;
  ctl = await startController(t, join(dir, 'ctl'), [], ctl.address);
  const after = await list();
  t.same(
    ['a1', 'a3'].map((n) => [after.get(n)!.expired, after.get(n)!.expiredAt, after.get(n)!.expiresAt]),
    ['a1', 'a3'].map((n) => [before.get(n)!.expired, before.get(n)!.expiredAt, before.get(n)!.expiresAt]),
    'the expiries are as before the restart',
  );
  const from3 = a1.proc.lines.length;
  await a1.proc.waitFor((l) => l.msg === 'stream ended; reconnecting' && l.code === 'MESHP_NODE_EXPIRED', 60_000, from3);
  t.pass("a1's hello is refused by the restarted controller");
  await json('node', 'renew', 'a1', '--yes');
  await waitUntil('a1 back', async () => (await live(ctl)).get('a1')!.connected, 60_000);

  // An agent renews its own credential before it expires, over its stream: a short node lifetime.
  t.same(await json('network', 'lifetime', '12s'), { network: 'default', seconds: 12, secondsBefore: 180 * 86400 });
  const short = await json<{ expiresAt: string }>('node', 'renew', 'a2', '--yes');
  const firstEnd = Date.parse(short.expiresAt);
  t.ok(firstEnd - Date.now() < 13_000, 'renewed for 12 s');
  const told = await a2.proc.waitFor((l) => l.msg === 'credential expiry' && Date.parse(String(l.expiresAt)) === firstEnd, 30_000);
  t.equal(Date.parse(String(told.renewAt)), firstEnd - 4_000, 'its agent is told to renew when a third of the term is left');
  const own = await ctl.proc.waitFor((l) => l.msg === 'credential renewed by its agent' && l.node === 'a2', 60_000);
  t.ok(Date.parse(String(own.expiresAt)) > firstEnd, 'the agent renewed before the expiry, without a token');
  await waitUntil('past the first expiry', () => Date.now() > firstEnd + 1_000, 30_000);
  const a2now = (await list()).get('a2')!;
  t.same([a2now.expired, a2now.status === 'expired'], [false, false], 'a2 never expired');
  t.equal((await json<{ seconds: number }>('network', 'lifetime', '180d')).seconds, 180 * 86400);
  await waitUntil('a2 renewed for 180 days', async () => Date.parse((await list()).get('a2')!.expiresAt!) > Date.now() + 100 * DAY, 60_000);

  // Rekey: the agent makes the key and reports it; its peers get it in one delta.
  t.match((await cli('node', 'rekey', 'a1', '--yes')).err, /^MESHP_USAGE: a1 runs no tunnel/, 'a node without a tunnel has no key to rotate');
  const k1 = publicKeyOf(generatePrivateKey());
  const k2 = publicKeyOf(generatePrivateKey());
  const r1 = new RawAgent(ctl);
  t.teardown(() => r1.link.close());
  await r1.enrol(await tokenFor(ctl, ['web']), 'r1', k1);
  const report = (tunnelKey: string) => ({
    report: {
      appliedVersion: r1.applier.appliedVersion,
      mode: 'converged' as const,
      firewallKind: '',
      firewallActive: false,
      resources: [],
      at: new Date().toISOString(),
      tunnelKey,
    },
  });
  const rekeys: string[] = [];
  const s = r1.open({
    expiryAware: true,
    other: (m) => {
      if ('rekey' in m) {
        rekeys.push(m.rekey.id);
        s.ch.send(report(k2));
      }
    },
  });
  const vk = await settled(ctl, 4);
  t.equal((await heldPeer(a1, 'r1'))?.tunnelKey, k1, 'a1 holds r1 with its enrolled key');
  t.match((await cli('node', 'rekey', 'a9', '--preview')).err, /^MESHP_NOT_FOUND/);
  const rp = await json<{ preview: boolean; tunnelKey: string; peers: string[] }>('node', 'rekey', 'r1', '--preview');
  t.same([rp.preview, rp.tunnelKey, rp.peers], [true, k1, ['a1', 'a2', 'a3']], 'the preview names the key and the peers that get the new one');
  t.same(rekeys, [], 'a preview asks nothing');
  const fromK = agents.map((a) => a.proc.lines.length);
  const rk = await json<{ tunnelKeyBefore: string; tunnelKey: string; stateVersion: number }>('node', 'rekey', 'r1', '--yes');
  t.same([rk.tunnelKeyBefore, rk.tunnelKey, rk.stateVersion], [k1, k2, vk + 1], 'the new key, in one version');
  t.equal(rekeys.length, 1, 'the agent was asked once');
  await settled(ctl, 4, vk + 1);
  for (const [i, a] of agents.entries()) {
    t.equal((await heldPeer(a, 'r1'))?.tunnelKey, k2, `${a.name} holds r1's new key`);
    t.same(appliedSince(a, fromK[i]!), [[vk, vk + 1]], `${a.name} got it in one delta`);
  }

  // The audit log: each change once, with its actor.
  const entries = (await json<{ entries: Entry[] }>('audit')).entries.filter((e) =>
    ['expireNode', 'renewNode', 'setNodeLifetime', 'rekeyNode'].includes(e.method),
  );
  t.same(
    entries.map((e) => [e.actor, e.method, e.node]),
    [
      ['admin', 'expireNode', 'a3'],
      ['admin', 'expireNode', 'a3'],
      ['admin', 'renewNode', 'a3'],
      ['admin', 'expireNode', 'a1'],
      ['admin', 'renewNode', 'a1'],
      ['admin', 'setNodeLifetime', null],
      ['admin', 'renewNode', 'a2'],
      ['admin', 'setNodeLifetime', null],
      ['admin', 'rekeyNode', 'r1'],
    ],
    'every expiry, renewal, lifetime and rekey asked is in the audit log with its actor (previews and refusals are not)',
  );
  t.match(
    entries.find((e) => e.method === 'rekeyNode')!.summary,
    new RegExp(`rekey r1: a new tunnel key asked \\(the key was ${k1.replace(/[+/]/g, '\\$&')}\\)`),
  );

  // Bad input: coded, nothing changed.
  t.match((await cli('node', 'renew', 'a1', '--for', '3x', '--yes')).err, /^MESHP_USAGE: --for 3x is not a duration/);
  t.match((await cli('network', 'lifetime', '5s')).err, /^MESHP_USAGE: a node lifetime is a whole number of seconds from 10/);
  t.ok(
    agents.every((a) => a.proc.alive),
    'every agent still runs',
  );
});

const missing = postgresMissing();
t.test(
  'on PostgreSQL: an expiry and the node lifetime survive a controller restart; the expired hello is refused; renewed, it is back',
  { skip: missing ?? false },
  async (t) => {
    const dir = workdir(t, 'nodeexppg');
    const cluster = startPostgres(t);
    const url = await cluster.createDb('expiry');
    let ctl = await startController(t, join(dir, 'ctl'), ['--store', url]);
    const json = async <T>(...args: string[]): Promise<T> => {
      const r = await meshpAsync(...args, '--controller', ctl.address, '--state', ctl.state, '--json');
      if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
      return JSON.parse(r.out) as T;
    };
    const node = async (name: string) => (await json<{ nodes: NodeJson[] }>('node', 'list')).nodes.find((n) => n.name === name)!;
    const a1 = startAgent(t, dir, 'a1', ctl.address, await tokenFor(ctl, ['web']));
    await settled(ctl, 1);
    t.equal((await json<{ seconds: number }>('network', 'lifetime', '30d')).seconds, 30 * 86400);
    await json('node', 'expire', 'a1', '--yes');
    const before = await node('a1');
    t.same([before.expired, before.status], [true, 'expired']);
    const from = a1.proc.lines.length;
    ctl.proc.kill('SIGTERM');
    await ctl.proc.exited;
    ctl = await startController(t, join(dir, 'ctl'), ['--store', url], ctl.address);
    const after = await node('a1');
    t.same([after.expired, after.expiredAt, after.expiresAt], [true, before.expiredAt, before.expiresAt], 'the expiry is as before the restart');
    t.same(await json('network', 'lifetime'), { network: 'default', seconds: 30 * 86400, default: false }, 'and the node lifetime');
    await a1.proc.waitFor((l) => l.msg === 'stream ended; reconnecting' && l.code === 'MESHP_NODE_EXPIRED', 60_000, from);
    t.pass("a1's hello is refused MESHP_NODE_EXPIRED by the restarted controller");
    const renewed = await json<{ expiresAt: string }>('node', 'renew', 'a1', '--yes');
    t.ok(Math.abs(Date.parse(renewed.expiresAt) - (Date.now() + 30 * DAY)) < 10 * 60_000, "renewed for the network's lifetime, 30 days");
    await waitUntil('a1 back', async () => (await live(ctl)).get('a1')!.connected, 60_000);
    t.equal((await node('a1')).expired, false, 'not expired');
  },
);

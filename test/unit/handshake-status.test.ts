/**
 * Status says only what was observed (issue 33 item 4): a tunnel member none of whose peers has
 * handshaked within the limit is NO-HANDSHAKE — in the controller's status, `node list`'s table,
 * `node show`, doctor's verdict and /metrics — never ok; one whose agent does not report handshakes
 * is UNVERIFIED, not ok by assumption; one with no peer configured is not judged. Ages come from the
 * agent's report and the controller's own clock, never by comparing the two clocks.
 */
import t from 'tap';
import {
  Controller,
  HANDSHAKE_STALE_SECONDS,
  MemoryStore,
  Metrics,
  nodeToWire,
  reportedHandshakes,
  serveMetrics,
  withLiveness,
  type ReportedState,
} from '@meshp/controller';
import type { PeerHandshake, ReportMessage } from '@meshp/core';
import { DeltaApplier } from '@meshp/core/delta';
import { generatePrivateKey, publicKeyOf } from '@meshp/tunnel-wireguard';
import { wire as pb } from '@meshp/transport-grpc';
import { nodeDetail, nodeJson, nodesTable, type WireNodeStatus } from '../../bin/src/remote/render.js';
import { verdictOf } from '../../bin/src/remote/ops.js';
import { scrape } from '../helpers/prom.js';

const NET = 'n';
/** The controller's clock in these tests: a report is received at T0. */
const T0 = Date.parse('2026-06-01T12:00:00Z');
const iso = (ms: number) => new Date(ms).toISOString();
const key = () => publicKeyOf(generatePrivateKey());

/** m1 joined and current (it applied and acked what it was sent: gap 0). */
function bed(tunnel = true) {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET);
  c.join(NET, { id: 'm1', nodeKey: 'k', mode: 'adopted', ...(tunnel ? { tunnelKey: key() } : {}) });
  const agent = new DeltaApplier();
  for (let d = c.deltaFor(NET, 'm1'); d; d = c.deltaFor(NET, 'm1')) {
    const r = agent.receive(structuredClone(d));
    if (r.status === 'applied') c.ack(NET, 'm1', r.ack.appliedVersion, r.ack.stateHash);
  }
  return c;
}

/** A report made at `madeAt` by the agent's clock, with these handshakes (undefined: an agent that does not report them). */
function agentReport(madeAt: number, handshakes: PeerHandshake[] | undefined): ReportMessage {
  return {
    appliedVersion: 1,
    mode: 'adopted',
    firewallKind: 'none',
    firewallActive: false,
    resources: [],
    at: iso(madeAt),
    ...(handshakes ? { peerHandshakes: handshakes } : {}),
  };
}

/** The report as the session takes it in, received at `receivedAt` by the controller's clock. */
function receive(c: Controller, r: ReportMessage, receivedAt: number): void {
  const handshakes = reportedHandshakes(r, c.reportedHandshakes(NET, 'm1'), iso(receivedAt));
  const reported: ReportedState = {
    version: 1,
    mode: 'adopted',
    at: r.at,
    refusedResources: 0,
    reconcile: { result: 'ok', code: '', message: '', at: r.at, refusedResources: 0 },
    ...(handshakes ? { handshakes } : {}),
  };
  c.report(NET, 'm1', { firewallKind: 'none', reported });
}

const peer = (name: string, latestHandshake: number): PeerHandshake => ({ peer: name, publicKey: key(), latestHandshake });
const sec = (ms: number) => Math.floor(ms / 1000);

function status(c: Controller, now: number, staleSeconds?: number) {
  return withLiveness(c.listNodes(NET)[0]!, { connected: true, lastSeen: iso(now), now, ...(staleSeconds ? { handshakeStaleSeconds: staleSeconds } : {}) });
}
const wire = (c: Controller, now: number): WireNodeStatus => pb.NodeStatus.fromPartial(nodeToWire(status(c, now), null));

t.test('the limit is stated: REJECT_AFTER_TIME plus the keepalive', async (t) => {
  t.equal(HANDSHAKE_STALE_SECONDS, 205);
});

t.test('a handshake within the limit is ok; none with any peer for longer is NO-HANDSHAKE everywhere, naming the age', async (t) => {
  const c = bed();
  // The agent's clock runs an hour ahead of the controller's: the age is the same.
  const skew = 3600_000;
  receive(c, agentReport(T0 + skew, [peer('m2', sec(T0 + skew) - 10), peer('m3', sec(T0 + skew) - 100)]), T0);
  t.match(
    status(c, T0 + 5_000),
    { status: 'ok', reasons: [], handshakes: { reported: true, peers: 2, newestAgeSeconds: 15, staleAfterSeconds: 205 } },
    '15 s old: ok',
  );
  t.match(status(c, T0 + 95_000), { status: 'ok' }, 'both within the limit (105 s and 195 s old): ok');
  // issue 27: m2's handshake goes on, m3's is past the limit: not no-handshake, but m3 is named.
  const one = status(c, T0 + 195_000);
  t.match(
    one,
    {
      status: 'peer-unreachable',
      statusDetail: 'cannot reach 1 of its 2 tunnel peers: m3 (last handshake 4m55s ago; no endpoint) (limit 205 s)',
      handshakes: {
        newestAgeSeconds: 205,
        paths: [
          { peer: 'm2', state: 'connected', ageSeconds: 205 },
          { peer: 'm3', state: 'stale', ageSeconds: 295 },
        ],
      },
    },
    'the newest 205 s old: at the limit, not no-handshake; m3 is 295 s old: PEER-UNREACHABLE names it',
  );

  const later = T0 + 218_000; // the newest is 228 s old: 3m48s
  const n = wire(c, later);
  t.match(n, {
    status: 'no-handshake',
    statusDetail: 'no handshake with any of its 2 tunnel peers for 3m48s (limit 205 s)',
    handshakes: { newestAgeSeconds: 228 },
  });
  t.match(nodesTable([n]), /^m1\s+NO-HANDSHAKE\s+ADOPTED/m, 'node list says it in capitals');
  t.match(nodeDetail(n), /tunnel: 2 peers, newest handshake 3m48s ago \(NO-HANDSHAKE past 205 s\)/, 'node show names the age');
  t.match(verdictOf(n, true), /^no-handshake: no handshake with any of its 2 tunnel peers for 3m48s/, 'doctor does not say in sync');
  t.notMatch(verdictOf(n, true), /in sync/);
  t.match(nodeJson(n), { status: 'no-handshake', handshakes: { reported: true, peers: 2, newestAgeSeconds: 228, staleAfterSeconds: 205 } }, 'node list --json');

  t.match(status(c, later, 330), { status: 'ok' }, "the limit is the controller's (--handshake-stale)");
  t.match(status(c, later, 300), { status: 'peer-unreachable', statusDetail: /m3 \(last handshake 5m18s ago/ }, 'm3 (318 s) past 300 s');

  // A new handshake with m2, reported: m3 is still named.
  receive(c, agentReport(later + skew, [peer('m2', sec(later + skew) - 3), peer('m3', sec(T0 + skew) - 100)]), later);
  t.match(status(c, later + 1_000), { status: 'peer-unreachable', handshakes: { newestAgeSeconds: 4 } });
  // And with m3: ok.
  receive(c, agentReport(later + skew, [peer('m2', sec(later + skew) - 3), peer('m3', sec(later + skew) - 1)]), later);
  t.match(status(c, later + 1_000), { status: 'ok', reasons: [], handshakes: { newestAgeSeconds: 2 } });
});

t.test('a node with no peer configured is not judged; peers never handshaked are, once they have waited the limit', async (t) => {
  const c = bed();
  receive(c, agentReport(T0, []), T0);
  t.match(status(c, T0 + 3600_000), { status: 'ok', handshakes: { reported: true, peers: 0 } }, 'no peer: nothing to flow, nothing flagged');

  receive(c, agentReport(T0 + 10_000, [peer('m2', 0)]), T0 + 10_000);
  t.match(status(c, T0 + 60_000), { status: 'ok', handshakes: { newestAgeSeconds: -1 } }, 'peers for 50 s, no handshake yet: not flagged yet');
  // Reported again, still never: the wait counts from when it first had peers.
  receive(c, agentReport(T0 + 200_000, [peer('m2', 0), peer('m3', 0)]), T0 + 200_000);
  const n = status(c, T0 + 250_000);
  t.match(n, { status: 'no-handshake', statusDetail: 'no handshake with any of its 2 tunnel peers yet, in the 4m00s it has reported them (limit 205 s)' });
  t.equal(nodeJson(pb.NodeStatus.fromPartial(nodeToWire(n, null))).handshakes?.newestAgeSeconds, null, 'never: null in --json');
});

t.test("issue 27: each peer's path as the device said; PEER-UNREACHABLE names a peer with no handshake, in every view", async (t) => {
  const c = bed();
  const at = (p: PeerHandshake, endpoint: string, path: 'direct' | 'relayed'): PeerHandshake => ({ ...p, endpoint, path });
  receive(
    c,
    agentReport(T0, [at(peer('m2', sec(T0) - 20), '192.0.2.7:40211', 'direct'), at(peer('m3', sec(T0) - 5), '127.0.0.1:51900', 'relayed'), peer('m4', 0)]),
    T0,
  );
  const early = status(c, T0 + 60_000);
  t.match(early, { status: 'ok', reasons: [] }, 'm4 configured 60 s ago, no handshake yet: waiting, not flagged');
  t.same(
    early.handshakes!.paths.map((p) => [p.peer, p.state, p.path, p.endpoint, p.ageSeconds]),
    [
      ['m2', 'connected', 'direct', '192.0.2.7:40211', 80],
      ['m3', 'connected', 'relayed', '127.0.0.1:51900', 65],
      ['m4', 'waiting', '', '', -1],
    ],
  );
  // Reported again: m4 still never, counted from when it was first reported.
  receive(
    c,
    agentReport(T0 + 200_000, [
      at(peer('m2', sec(T0 + 200_000) - 20), '192.0.2.7:40211', 'direct'),
      at(peer('m3', sec(T0 + 200_000) - 5), '127.0.0.1:51900', 'relayed'),
      at(peer('m4', 0), '198.51.100.4:51820', 'direct'),
    ]),
    T0 + 200_000,
  );
  const now = T0 + 240_000;
  const n = wire(c, now);
  t.match(n, {
    status: 'peer-unreachable',
    statusDetail: 'cannot reach 1 of its 3 tunnel peers: m4 (never handshaked; endpoint 198.51.100.4:51820) (limit 205 s)',
  });
  t.match(nodesTable([n]), /^m1\s+PEER-UNREACHABLE\s/m, 'node list flags it');
  const shown = nodeDetail(n);
  t.match(shown, /^ {2}peer m2: connected, direct via 192\.0\.2\.7:40211, last handshake 1m00s ago$/m, 'node show: each peer, direct');
  t.match(shown, /^ {2}peer m3: connected, relayed via 127\.0\.0\.1:51900, last handshake 45s ago$/m, 'relayed said as relayed');
  t.match(shown, /^ {2}peer m4: never, direct via 198\.51\.100\.4:51820, no handshake yet$/m, 'never: not connected');
  t.match(verdictOf(n, true), /^peer-unreachable: cannot reach 1 of its 3 tunnel peers: m4/, 'doctor: not in sync');
  t.match(nodeJson(n).handshakes?.paths, [
    { peer: 'm2', state: 'connected', path: 'direct', endpoint: '192.0.2.7:40211', ageSeconds: 60 },
    { peer: 'm3', state: 'connected', path: 'relayed' },
    { peer: 'm4', state: 'never', ageSeconds: null },
  ]);

  const metrics = new Metrics();
  metrics.attach({
    controller: c,
    connected: () => 1,
    live: () => ({ connected: true, lastSeen: iso(now), now, handshakeStaleSeconds: 205 }),
    handshakeStaleSeconds: 205,
  });
  const server = await serveMetrics('127.0.0.1:0', () => metrics.render());
  t.teardown(() => server.close());
  const m = await scrape(server.address);
  t.equal(m.value('meshp_node_status', { node: 'm1', status: 'peer-unreachable' }), 1);
  t.equal(m.value('meshp_peer_connected', { node: 'm1', peer: 'm2', path: 'direct' }), 1);
  t.equal(m.value('meshp_peer_connected', { node: 'm1', peer: 'm3', path: 'relayed' }), 1);
  t.equal(m.value('meshp_peer_connected', { node: 'm1', peer: 'm4', path: 'direct' }), 0);
  t.equal(m.value('meshp_peer_handshake_age_seconds', { node: 'm1', peer: 'm2' }), 60);
  t.equal(m.value('meshp_peer_handshake_age_seconds', { node: 'm1', peer: 'm4' }), -1);

  // A direct trial on m3: trying, said as a trial, never as direct (its handshake came on the relay).
  receive(
    c,
    agentReport(T0 + 250_000, [
      at(peer('m2', sec(T0 + 250_000) - 20), '192.0.2.7:40211', 'direct'),
      { ...peer('m3', sec(T0 + 250_000) - 5), endpoint: '192.0.2.9:51820', path: 'trying' },
      at(peer('m4', 0), '198.51.100.4:51820', 'direct'),
    ]),
    T0 + 250_000,
  );
  const trial = wire(c, T0 + 250_000);
  t.match(
    nodeDetail(trial),
    /^ {2}peer m3: connected, trying a direct path via 192\.0\.2\.9:51820 \(the handshake was on the relay\), last handshake 5s ago$/m,
    'node show: a trial is said as one',
  );
  t.match(nodeJson(trial).handshakes?.paths, [{ peer: 'm2' }, { peer: 'm3', path: 'trying', endpoint: '192.0.2.9:51820' }, { peer: 'm4' }]);

  // Every peer lost: no-handshake says it, not also peer-unreachable.
  const all = status(c, T0 + 600_000);
  t.same(
    all.reasons.map((r) => r.status),
    ['no-handshake'],
  );
});

t.test(
  'an agent that does not report handshakes is UNVERIFIED on a tunnel member, never ok by assumption; a node without a tunnel is not judged',
  async (t) => {
    const c = bed();
    receive(c, agentReport(T0, undefined), T0);
    const n = wire(c, T0 + 1_000);
    t.match(n, { status: 'unverified', statusDetail: /does not report tunnel handshakes/, handshakes: { reported: false } });
    t.match(nodesTable([n]), /^m1\s+UNVERIFIED/m);
    t.match(verdictOf(n, true), /^in sync: .*; its tunnel is unverified: its agent does not report/, 'doctor: in sync, and the tunnel not observed');
    t.match(nodeDetail(n), /tunnel: its agent does not report handshakes \(unverified\)/);

    const plain = bed(false);
    plain.report(NET, 'm1', { firewallKind: 'none', reported: { version: 1, mode: 'adopted', at: iso(T0), refusedResources: 0 } });
    const p = status(plain, T0 + 1_000);
    t.match(p, { status: 'ok', reasons: [] });
    t.equal(p.handshakes, undefined, 'no tunnel: no handshakes said');
  },
);

t.test('every reason is kept, worst first: refusing over no-handshake, behind over unverified', async (t) => {
  const c = bed();
  receive(c, agentReport(T0, [peer('m2', sec(T0) - 300)]), T0);
  c.report(NET, 'm1', {
    reported: { version: 1, mode: 'adopted', at: iso(T0), refusedResources: 2, refusedCodes: { MESHP_X: 2 }, handshakes: c.reportedHandshakes(NET, 'm1')! },
  });
  const n = status(c, T0);
  t.same(
    n.reasons.map((r) => r.status),
    ['refusing', 'no-handshake'],
  );
  t.equal(n.status, 'refusing');
  t.match(
    nodeDetail(pb.NodeStatus.fromPartial(nodeToWire(n, null))),
    /also NO-HANDSHAKE: no handshake with any of its 1 tunnel peer for 5m00s/,
    'node show says the others too',
  );

  const u = bed();
  receive(u, agentReport(T0, undefined), T0);
  const b = withLiveness({ ...u.listNodes(NET)[0]!, gap: 2 }, { connected: true, lastSeen: iso(T0), now: T0 });
  t.same(
    b.reasons.map((r) => r.status),
    ['behind', 'unverified'],
    'not observed is said last, never over what was',
  );
});

t.test('/metrics: the status, the age of the newest handshake, the limit; no series for what was not observed', async (t) => {
  const c = bed();
  c.join(NET, { id: 'm9', nodeKey: 'k9', mode: 'adopted', tunnelKey: key() });
  receive(c, agentReport(T0, [peer('m2', sec(T0) - 228)]), T0);
  const metrics = new Metrics();
  metrics.attach({
    controller: c,
    connected: () => 2,
    live: () => ({ connected: true, lastSeen: iso(T0), lastContact: iso(T0), now: T0, handshakeStaleSeconds: 205 }),
    handshakeStaleSeconds: 205,
  });
  const server = await serveMetrics('127.0.0.1:0', () => metrics.render());
  t.teardown(() => server.close());
  const m = await scrape(server.address);
  t.equal(m.value('meshp_node_status', { node: 'm1', status: 'no-handshake' }), 1);
  t.equal(m.value('meshp_node_status', { node: 'm1', status: 'ok' }), 0);
  t.equal(m.value('meshp_node_tunnel_handshake_age_seconds', { node: 'm1' }), 228);
  t.equal(m.value('meshp_node_tunnel_peers', { node: 'm1' }), 1);
  t.equal(m.value('meshp_handshake_stale_seconds'), 205);
  t.equal(m.value('meshp_node_last_contact_timestamp_seconds', { node: 'm1' }), T0 / 1000);
  t.equal(m.value('meshp_node_tunnel_handshake_age_seconds', { node: 'm9' }), undefined, 'm9 never reported handshakes: no age said');
  t.equal(m.value('meshp_node_status', { node: 'm9', status: 'pending' }), 1);
});

t.test('LAST CONTACT is the stream: now while connected, whatever the last message; when it ended once not', async (t) => {
  const c = bed(false);
  c.report(NET, 'm1', { firewallKind: 'none', reported: { version: 1, mode: 'adopted', at: iso(T0), refusedResources: 0 } });
  const message = iso(T0);
  const connected = pb.NodeStatus.fromPartial(
    nodeToWire(withLiveness(c.listNodes(NET)[0]!, { connected: true, lastSeen: message, lastContact: iso(T0 + 600_000), now: T0 + 600_000 }), null),
  );
  t.match(nodesTable([connected]), /LAST CONTACT[\s\S]*^m1\s+ok\s.*\snow\s/m, 'an idle connected agent is in contact now, not 10 minutes ago');
  t.match(nodeJson(connected), { connected: true, lastContact: 'now', lastSeen: message }, '--json: the last message said apart');
  const ended = iso(T0 + 300_000);
  const gone = pb.NodeStatus.fromPartial(
    nodeToWire(withLiveness(c.listNodes(NET)[0]!, { connected: false, lastSeen: message, lastContact: ended, now: T0 + 600_000 }), null),
  );
  t.match(nodesTable([gone]), new RegExp(`^m1\\s+SILENT\\s.*\\s${ended.replace(/[.]/g, '\\.')}\\s`, 'm'), 'not connected: when its stream ended');
  t.match(gone.statusDetail, `not connected (its stream ended ${ended}); last seen ${message}`);
  t.match(nodeDetail(gone), /not connected \(last contact 2026-06-01T12:05:00\.000Z\); last message 2026-06-01T12:00:00\.000Z/);
});

t.test('a member of a tunnel network without a tunnel is NO-TUNNEL, and no handshake is judged over it', async (t) => {
  const c = new Controller(new MemoryStore());
  c.createNetwork(NET, { privateNetwork: 'tunnel' });
  c.join(NET, { id: 'm1', nodeKey: 'k', mode: 'adopted', tunnelKey: key() });
  const agent = new DeltaApplier();
  for (let d = c.deltaFor(NET, 'm1'); d; d = c.deltaFor(NET, 'm1')) {
    const r = agent.receive(structuredClone(d));
    if (r.status === 'applied') c.ack(NET, 'm1', r.ack.appliedVersion, r.ack.stateHash);
  }
  // Its agent runs no tunnel: no key, no handshakes reported.
  c.report(NET, 'm1', {
    firewallKind: 'none',
    reported: { version: 1, mode: 'adopted', at: iso(T0), refusedResources: 0, tunnel: { key: false, interface: '', error: '' } },
  });
  const n = status(c, T0 + 1_000);
  t.equal(n.status, 'no-tunnel');
  t.same(
    n.reasons.map((r) => r.status),
    ['no-tunnel'],
    'not also unverified: there is no tunnel whose handshakes could be reported',
  );
});

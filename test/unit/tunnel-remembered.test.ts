/**
 * The tunnel is remembered and a member of a tunnel network without one is flagged (issue 33 item 3):
 * the choice from the flags, the record and the network's word; a tunnel network's token says so; a
 * member whose agent reports no tunnel key, or a tunnel error, is NO-TUNNEL in `node list`, `node
 * show` and doctor, its mesh address not claimed as held; outside a tunnel network nothing changes.
 */
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Controller, MemoryStore, nodeToWire, withLiveness, type ReportedState } from '@meshp/controller';
import { decodeToken, encodeToken } from '@meshp/core/agent';
import { DeltaApplier } from '@meshp/core/delta';
import { generatePrivateKey } from '@meshp/tunnel-wireguard';
import { wire as pb } from '@meshp/transport-grpc';
import { nodeDetail, nodeJson, nodesTable } from '../../bin/src/remote/render.js';
import { verdictOf } from '../../bin/src/remote/ops.js';
import { decideTunnel, knownTunnel, writeTunnelRecord } from '../../bin/src/remote/tunnel-record.js';

const FP = 'a'.repeat(64);

t.test('what the agent runs: flags, then the record, then the network; mismatches refused naming both', async (t) => {
  const rec = (r: Parameters<typeof writeTunnelRecord>[1]) => ({ record: r, from: 'recorded in X/tunnel.json', inferred: false });
  t.same(decideTunnel({}, null), { tunnel: 'none', explicit: false }, 'no word from anyone: none');
  t.match(
    decideTunnel({ networkTunnel: true }, null),
    { tunnel: 'wireguard', interface: 'meshp0', why: /the network/ },
    "a tunnel network's member raises meshp0 unasked",
  );
  t.same(decideTunnel({ tunnel: 'none', networkTunnel: true }, null), { tunnel: 'none', explicit: true }, '--tunnel none opts out');
  t.same(decideTunnel({ networkTunnel: true }, rec({ tunnel: 'none' })), { tunnel: 'none', explicit: false }, 'the opt-out is remembered');
  t.match(decideTunnel({ tunnel: 'wireguard' }, rec({ tunnel: 'none' })), { tunnel: 'wireguard', interface: 'meshp0' }, 'and undone by --tunnel wireguard');
  const wg7 = rec({ tunnel: 'wireguard', interface: 'wg7', publicKey: 'K=' });
  t.match(decideTunnel({}, wg7), { tunnel: 'wireguard', interface: 'wg7' }, 'no flags: the recorded interface');
  t.match(
    decideTunnel({ tunnel: 'wireguard' }, wg7),
    { tunnel: 'wireguard', interface: 'wg7' },
    '--tunnel wireguard alone: the recorded interface, not meshp0',
  );
  t.match(decideTunnel({ tunnel: 'wireguard', interface: 'wg7' }, wg7), { interface: 'wg7' }, 'the same name: fine');
  t.throws(() => decideTunnel({ tunnel: 'wireguard', interface: 'wg8' }, wg7), {
    code: 'MESHP_TUNNEL_MISMATCH',
    message: /--tunnel-interface wg8: this node's tunnel is wg7, key K= .*--tunnel-move/,
  });
  t.match(
    decideTunnel({ interface: 'wg8', move: true }, wg7),
    { tunnel: 'wireguard', interface: 'wg8', moveFrom: 'wg7' },
    '--tunnel-move: moved, from the recorded one',
  );
  t.throws(() => decideTunnel({ tunnel: 'none' }, wg7), { code: 'MESHP_TUNNEL_MISMATCH', message: /--tunnel none: this node runs the tunnel on wg7/ });
  t.throws(() => decideTunnel({ tunnel: 'gre' }, null), { code: 'MESHP_USAGE' });
  t.throws(() => decideTunnel({ move: true }, wg7), { code: 'MESHP_USAGE', message: /--tunnel-interface/ }, '--tunnel-move names where to');
});

t.test('a state folder from before the record: its one key names the tunnel; several are not guessed between', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'meshp-trm-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  t.equal(knownTunnel(dir), null);
  mkdirSync(join(dir, 'wireguard'));
  writeFileSync(join(dir, 'wireguard', 'wgold.key'), generatePrivateKey() + '\n');
  const one = knownTunnel(dir)!;
  t.match(one, { record: { tunnel: 'wireguard', interface: 'wgold' }, inferred: true });
  t.match(decideTunnel({ tunnel: 'wireguard' }, one), { interface: 'wgold' }, 'its interface, not a second one');
  t.same(decideTunnel({ tunnel: 'none' }, one), { tunnel: 'none', explicit: true }, 'a found key is not a running tunnel: opting out is allowed');
  writeFileSync(join(dir, 'wireguard', 'wgnew.key'), generatePrivateKey() + '\n');
  t.throws(() => knownTunnel(dir), { code: 'MESHP_TUNNEL_MISMATCH', message: /wgnew, wgold/ });
  t.match(knownTunnel(dir, 'wgnew'), { record: { interface: 'wgnew' } }, 'unless one is named');
  writeTunnelRecord(dir, { tunnel: 'wireguard', interface: 'wgold' });
  t.match(knownTunnel(dir), { record: { interface: 'wgold' }, inferred: false }, 'the record decides');
});

t.test("a tunnel network's token says so; another network's does not; an older token still reads", async (t) => {
  const tok = encodeToken({ network: 'n', adopted: false, fingerprint: FP, tunnel: 'wireguard' }, 's');
  t.equal(decodeToken(tok).claims.tunnel, 'wireguard');
  t.equal(decodeToken(encodeToken({ network: 'n', adopted: false, fingerprint: FP }, 's')).claims.tunnel, undefined);
  const old = `meshp1.${Buffer.from(JSON.stringify({ n: 'n', a: true, f: FP })).toString('base64url')}.s`;
  t.same(decodeToken(old).claims, { network: 'n', adopted: true, fingerprint: FP });
});

const reported = (tunnel?: ReportedState['tunnel']): ReportedState => ({
  version: 1,
  mode: 'converged',
  at: '2026-01-01T00:00:05Z',
  refusedResources: 0,
  reconcile: { result: 'ok', code: '', message: '', at: '2026-01-01T00:00:05Z', refusedResources: 0 },
  ...(tunnel ? { tunnel } : {}),
});

function node(privateNetwork: 'tunnel' | 'interface' | undefined, tunnel?: ReportedState['tunnel']) {
  const c = new Controller(new MemoryStore());
  c.createNetwork('n', privateNetwork ? { privateNetwork } : {});
  c.join('n', { id: 'm2', nodeKey: 'k' });
  c.report('n', 'm2', { firewallKind: 'none', reported: reported(tunnel) });
  // Every delta applied and acked: gap 0, so only the tunnel can make it not ok.
  const agent = new DeltaApplier();
  for (let d = c.deltaFor('n', 'm2'); d; d = c.deltaFor('n', 'm2')) {
    const r = agent.receive(structuredClone(d));
    if (r.status === 'applied') c.ack('n', 'm2', r.ack.appliedVersion, r.ack.stateHash);
  }
  const s = withLiveness(c.listNodes('n')[0]!, { connected: true, lastSeen: '2026-01-01T00:00:05Z' });
  return { c, s, wire: pb.NodeStatus.fromPartial(nodeToWire(s, null)) };
}

t.test('a member of a tunnel network without a tunnel is NO-TUNNEL, and its mesh address is not claimed', async (t) => {
  const none = node('tunnel', { key: false, interface: '', error: '' });
  t.equal(none.s.status, 'no-tunnel');
  t.match(none.s.statusDetail, /a member of a tunnel network whose agent runs no tunnel.*its mesh address 100\.96\.0\.1 is not held/);
  t.match(nodesTable([none.wire]), /^m2\s+NO-TUNNEL\s+converged/m, 'node list');
  t.match(nodeDetail(none.wire), /addresses 100\.96\.0\.1 \(allocated, not held: no tunnel\)/, 'node show');
  t.match(nodeJson(none.wire), { status: 'no-tunnel', tunnel: 'none' }, 'node list --json');
  t.match(verdictOf(none.wire, true), /^no tunnel: /, 'doctor');

  const down = node('tunnel', { key: true, interface: 'meshp0', error: 'MESHP_TUNNEL_UNAVAILABLE: wireguard-go could not be started' });
  t.equal(down.s.status, 'no-tunnel');
  t.match(
    down.s.statusDetail,
    /its tunnel meshp0 failed: MESHP_TUNNEL_UNAVAILABLE: wireguard-go could not be started; its mesh address 100\.96\.0\.1 is not known to be held/,
  );

  const up = node('tunnel', { key: true, interface: 'meshp0', error: '' });
  t.equal(up.s.status, 'ok', 'a tunnel that is up: ok');
  t.match(nodeDetail(up.wire), /addresses 100\.96\.0\.1 \(tunnel meshp0\)/);

  t.equal(node('interface', { key: false, interface: '', error: '' }).s.status, 'ok', 'a network on a shared interface: no tunnel expected');
  t.equal(node(undefined, { key: false, interface: '', error: '' }).s.status, 'ok', 'a network that said nothing: not flagged');
  t.equal(node('tunnel').s.status, 'ok', 'a report from before the field (an older controller wrote it): not guessed');
});

t.test("the controller's tokens of a tunnel network carry the tunnel claim", async (t) => {
  const { Enrolment } = await import('@meshp/controller');
  const c = new Controller(new MemoryStore());
  c.createNetwork('tun', { privateNetwork: 'tunnel' });
  c.createNetwork('lan', { privateNetwork: 'interface' });
  const tokens = new Map<string, unknown>();
  const book = { putToken: (s: string, r: unknown) => void tokens.set(s, r) } as unknown as ConstructorParameters<typeof Enrolment>[1];
  const e = new Enrolment(c, book, FP);
  t.equal(decodeToken(e.createToken({ network: 'tun', mode: 'converged', ttlSeconds: 60, tags: [] }).token).claims.tunnel, 'wireguard');
  t.equal(decodeToken(e.createToken({ network: 'lan', mode: 'converged', ttlSeconds: 60, tags: [] }).token).claims.tunnel, undefined);
  t.equal(c.isTunnelNetwork('tun'), true);
});

/**
 * A relayed path on a real TURN server (issue 27): coturn in the public namespace (`use-auth-secret`,
 * TURN REST API credentials), s1 behind an endpoint-independent NAT and s3 behind a symmetric one,
 * which cannot handshake directly (nat.test.ts). Each runs a relay proxy in its namespace
 * (relay-proxy.ts: a loopback socket WireGuard's peer endpoint is set to, an allocation on coturn);
 * given each other's relayed address, s1 and s3 handshake through coturn and TCP flows; the path
 * each reports is relayed; coturn sees only WireGuard's datagrams (the proxies count them). A
 * credential not made with the server's secret gets no allocation.
 */
import t from 'tap';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes } from 'node:crypto';
import type { Peer } from '@meshp/core';
import { parseDump, peerConfig, peerHandshakes, turnCredential, type PeerConfig } from '@meshp/tunnel-wireguard';
import { labAvailable, type Netns } from '../../helpers/netns.js';
import { until } from '../../helpers/budget.js';
import { WG_PORT, tunnelOf, type LabNode } from '../tunnel-wireguard/bed.js';
import { P0_IP, coturn, natBed } from './bed.js';

const RELAY_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'relay.mjs');
const TURN = `${P0_IP}:3478`;
const SECRET = randomBytes(16).toString('hex');
const rule = { sourceTags: ['site'], destinationTags: ['site'], ports: ['7000'] };
const peer = (of: LabNode, tags: string[], endpoints: string[]): Peer => ({
  id: of.name,
  nodeKey: `ed25519-${of.name}`,
  addresses: [of.mesh],
  tags,
  endpoints,
  inboundOnly: false,
  tunnelKey: of.publicKey,
});

interface Line {
  msg: string;
  relayed?: string;
  local?: string;
  err?: string;
  counts?: { toRelay: number; fromRelay: number };
  socketsBefore?: number;
  socketsAfter?: number;
}
/** A process in the namespace whose stdout is JSON lines; killed by pid in teardown. */
function proc(t: { teardown(fn: () => unknown): void }, ns: Netns, cmd: string, args: string[]) {
  const [c, a] = ns.wrap(cmd, args);
  const child: ChildProcess = spawn(c, a, { stdio: ['pipe', 'pipe', 'pipe'] });
  t.teardown(() => {
    if (child.exitCode === null && child.pid) process.kill(child.pid, 'SIGKILL');
  });
  const lines: Line[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => {
    try {
      lines.push(JSON.parse(l) as Line);
    } catch {
      lines.push({ msg: l });
    }
  });
  let err = '';
  child.stderr!.on('data', (d: Buffer) => (err += d.toString()));
  return { child, lines, stderr: () => err };
}

t.test(
  'relayed on coturn',
  { skip: labAvailable() ? false : 'needs root for namespaces, nftables, wireguard-go and coturn (CI runs it as root)' },
  async (t) => {
    const { p0, sites } = await natBed(t, ['endpoint-independent', 'symmetric']);
    // s3 here: the symmetric site (the bed names it by its place: s2).
    const [s1, s3] = sites.map((s) => s.node) as [LabNode, LabNode];
    const turn = await coturn(t, p0, SECRET);
    for (const n of [s1, s3]) await n.start(60_000);

    const relay = async (n: LabNode, secret = SECRET) => {
      const r = proc(t, n.ns, process.execPath, [
        RELAY_SCRIPT,
        JSON.stringify({ server: TURN, credential: turnCredential(secret, n.name, 600), wireguardPort: WG_PORT }),
      ]);
      const first = await until(
        `${n.name}'s relay proxy`,
        () => r.lines[0] ?? (r.child.exitCode !== null ? { msg: 'exited', err: r.stderr() } : null),
        20,
        100,
      );
      return { ...r, first };
    };

    await t.test('a credential not made with the server secret gets no allocation', async (t) => {
      const bad = await relay(s1, 'not-the-secret');
      t.equal(bad.first.msg, 'failed', `refused: ${bad.first.err}`);
      // Asked three times: each refused Allocate closed its socket (werift-ice's createTurnClient kept it).
      t.equal(bad.first.socketsAfter, bad.first.socketsBefore, `no socket left behind by three refusals (${bad.first.socketsBefore} held before)`);
    });

    const r1 = await relay(s1);
    const r3 = await relay(s3);
    t.equal(r1.first.msg, 'ready', `s1 has an allocation: ${r1.first.relayed ?? r1.first.err}`);
    t.equal(r3.first.msg, 'ready', `s3 has an allocation: ${r3.first.relayed ?? r3.first.err}`);
    if (r1.first.msg !== 'ready' || r3.first.msg !== 'ready') return;
    t.match(r1.first.relayed, new RegExp(`^${P0_IP.replace(/\./g, '\\.')}:\\d+$`), 'relayed on the public side');
    const connect = async (r: typeof r1, peerRelayed: string): Promise<string> => {
      r.child.stdin!.write(JSON.stringify({ op: 'connect', peer: peerRelayed }) + '\n');
      return (await until('the peer socket', () => r.lines.find((l) => l.msg === 'ok')?.local ?? null, 20, 100)) as string;
    };
    const local1 = await connect(r1, r3.first.relayed!);
    const local3 = await connect(r3, r1.first.relayed!);

    // Each WireGuard peer's endpoint is its own node's proxy on loopback.
    const v1 = [peer(s3, ['site'], [local1])];
    const v3 = [peer(s1, ['site'], [local3])];
    await s1.delta({ network: 'lab', fromVersion: 0, toVersion: 1, upsertPeers: v1, removePeers: [], tunnel: tunnelOf(s1), filter: { rules: [rule] } });
    await s3.delta({ network: 'lab', fromVersion: 0, toVersion: 1, upsertPeers: v3, removePeers: [], tunnel: tunnelOf(s3), filter: { rules: [rule] } });

    await t.test('s1 and s3 handshake through coturn; TCP flows; the path says relayed', async (t) => {
      await until('s1 and s3 handshake via the relay', async () => ((await s1.wgPeers()).get(s3.publicKey) ?? 0) > 0, 60, 500);
      t.ok(await s1.reaches(s3), 'TCP flows s1 → s3:7000 through the relay');
      t.ok(await s3.reaches(s1), 'TCP flows s3 → s1:7000');
      const { stdout } = await s1.ns.exec('wg', ['show', s1.ifname, 'dump']);
      const configured = new Map(v1.map((p) => [p.id, peerConfig(p, 25) as PeerConfig]));
      const hs = peerHandshakes(configured, parseDump(stdout), (e) => e === local1);
      t.match(hs[0], { peer: s3.name, path: 'relayed', endpoint: local1 }, "s1's report: relayed, via its proxy");
      t.ok(hs[0]!.latestHandshake > 0);
    });
    t.comment(`coturn: ${turn.lines.filter((l) => /allocation|session/i.test(l)).length} allocation/session lines`);
  },
);

/**
 * The tunnel plugin's kernel path (issue 16), as far as this machine can carry it. The kernel here
 * has no WireGuard module, so a kernel interface cannot be created; but `wg` — the tool KernelDevice
 * configures and reads the kernel's interface with — speaks the same protocol to wireguard-go's UAPI
 * socket. So every `wg set` KernelDevice builds (key, port, peers added, moved, removed) and every
 * `wg show dump` it parses runs here against a real WireGuard interface, read back both through `wg`
 * and through the UAPI `get=1` the userspace path uses; and `auto` is checked against what this
 * kernel really answers. Only `ip link add … type wireguard` succeeding is left to a machine with
 * the module (the README says so).
 */
import t from 'tap';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { generatePrivateKey, publicKeyOf } from '@meshp/tunnel-wireguard';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';
import { workdir } from '../helpers/grpc-procs.js';

const CHILD = new URL('../helpers/kernel-device-child.mjs', import.meta.url).pathname;

interface Peer {
  publicKey: string;
  endpoint?: string;
  allowedIps: string[];
  persistentKeepalive: number;
}
interface Device {
  listenPort: number;
  privateKey?: string;
  peers: Peer[];
}
type Step = { step: string } & Record<string, unknown>;

const byKey = (d: Device) =>
  Object.fromEntries(d.peers.map((p) => [p.publicKey, { endpoint: p.endpoint, allowedIps: [...p.allowedIps].sort(), keepalive: p.persistentKeepalive }]));

t.test(
  'KernelDevice drives a real WireGuard interface through wg',
  { skip: labAvailable() ? false : 'needs root for a namespace and wireguard-go (CI runs it as root)' },
  async (t) => {
    const ifname = `${runPrefix('kd')}w`;
    const dir = workdir(t, 'kdev');
    const ns = await netns(t, `${ifname}n`);
    const p1 = { publicKey: publicKeyOf(generatePrivateKey()), allowedIps: ['10.77.0.2/32', 'fd77::2/128'], endpoint: '192.0.2.10:51820', keepalive: 25 };
    const p2 = { publicKey: publicKeyOf(generatePrivateKey()), allowedIps: ['10.77.0.3/32'], endpoint: '192.0.2.11:51821', keepalive: 25 };
    const moved = { allowedIps: ['10.77.0.30/32'], endpoint: '192.0.2.12:51999', keepalive: 10 };
    const conf = { ifname, stateDir: join(dir, 'wg'), listenPort: 51888, peers: [p1, p2], moved };
    const child = spawn('nsenter', [`--net=${ns.path}`, '--', process.execPath, CHILD, JSON.stringify(conf)], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    t.teardown(() => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    });
    const steps = new Map<string, Step>();
    for await (const line of createInterface({ input: child.stdout })) {
      const s = JSON.parse(line) as Step;
      steps.set(s.step, s);
    }
    const exit = await new Promise<number | null>((r) => (child.exitCode !== null ? r(child.exitCode) : child.once('exit', (c) => r(c))));
    t.equal(exit, 0, `the child ran to its end: ${stderr}`);
    t.notOk(steps.has('error'), `no step failed: ${JSON.stringify(steps.get('error'))}`);

    const auto = steps.get('auto')!;
    t.equal(
      auto.implementation,
      auto.moduleLoaded ? 'kernel' : 'wireguard-go',
      `auto picks what this kernel carries (module loaded: ${String(auto.moduleLoaded)})`,
    );
    const up = steps.get('kernel-up')!;
    if (auto.moduleLoaded) t.equal(up.ok, true, 'with the module, the kernel link is made');
    else {
      t.equal(up.ok, false, 'with no module, the kernel link cannot be made');
      t.equal(up.code, 'MESHP_TUNNEL_UNAVAILABLE', 'refused with a code');
      t.match(
        String(up.message),
        /^kernel WireGuard: ip link add \S+k type wireguard: .+ \(no wireguard module\? implementation wireguard-go runs in userspace\)$/,
        'naming the command, what ip said, and the way out',
      );
    }

    const set = steps.get('set') as Step & { viaWg: Device; viaUapi: Device; publicKey: string };
    t.equal(set.viaWg.listenPort, 51888, 'wg set: the listen port');
    t.equal(set.viaWg.privateKey && publicKeyOf(set.viaWg.privateKey), set.publicKey, 'wg set: the private key from the 0600 key file');
    t.same(
      byKey(set.viaWg),
      {
        [p1.publicKey]: { endpoint: p1.endpoint, allowedIps: [...p1.allowedIps].sort(), keepalive: 25 },
        [p2.publicKey]: { endpoint: p2.endpoint, allowedIps: p2.allowedIps, keepalive: 25 },
      },
      'both peers, with their endpoints, allowed IPs (v4 and v6) and keepalive, read through wg show dump',
    );
    t.same(byKey(set.viaUapi), byKey(set.viaWg), 'and the UAPI get=1 the userspace path reads says the same');
    t.equal(set.viaUapi.listenPort, set.viaWg.listenPort);

    const mv = steps.get('moved') as Step & { viaWg: Device; viaUapi: Device };
    t.same(
      byKey(mv.viaWg)[p2.publicKey],
      { endpoint: moved.endpoint, allowedIps: moved.allowedIps, keepalive: 10 },
      'an upsert replaces the allowed IPs (not added to them), endpoint and keepalive',
    );
    t.same(
      byKey(mv.viaWg)[p1.publicKey],
      { endpoint: p1.endpoint, allowedIps: [...p1.allowedIps].sort(), keepalive: 25 },
      'the peer the change did not name is untouched',
    );
    t.same(byKey(mv.viaUapi), byKey(mv.viaWg), 'UAPI agrees');

    const rm = steps.get('removed') as Step & { viaWg: Device; viaUapi: Device };
    t.same(Object.keys(byKey(rm.viaWg)), [p2.publicKey], 'REMOVED: the peer is gone from the interface in that one call');
    t.same(byKey(rm.viaUapi), byKey(rm.viaWg), 'UAPI agrees');
    t.same(byKey((steps.get('empty') as Step & { viaWg: Device }).viaWg), byKey(rm.viaWg), 'an empty change changes nothing');
    t.equal(steps.get('done')?.socketLeft, false, 'wireguard-go stopped: its socket is gone');
    t.notOk(existsSync(`/var/run/wireguard/${ifname}.sock`));
  },
);

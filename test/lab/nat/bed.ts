/**
 * The NAT lab's bed (issue 27): a "public" segment (one bridge) holding the public node p0 and one
 * router per site; each site's node sits alone on its router's LAN, its default route through the
 * router. Each router masquerades its LAN out of its public side with nftables, and drops what comes
 * in unasked (a new connection from the public side), as a home router does:
 *  - `masquerade` (endpoint-independent mapping: Linux keeps the source port, one mapping for every
 *    destination) for the usual home router;
 *  - `masquerade fully-random` (a new port for each destination: a symmetric NAT).
 * The nodes run the tunnel plugin (../tunnel-wireguard/node.mjs) fed views by the test. Teardown,
 * registered before anything starts: processes and each wireguard-go by pid, sockets, folders,
 * namespaces (netns.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { netns, runPrefix, underlay, wire, type Netns } from '../../helpers/netns.js';
import { until } from '../../helpers/budget.js';
import { LabNode, alive } from '../tunnel-wireguard/bed.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

export const PUBLIC_NET = '10.96.0';
export const P0_IP = `${PUBLIC_NET}.10`;

export type NatKind = 'endpoint-independent' | 'symmetric';

export interface Site {
  node: LabNode;
  router: Netns;
  /** The router's public address: what the site's node's traffic comes from, outside. */
  publicIp: string;
  kind: NatKind;
}

/** The router's ruleset: masquerade out of the public side; nothing new in from it. */
export function natRuleset(publicIf: string, kind: NatKind): string {
  return `table ip meshp_lab_nat {
  chain post { type nat hook postrouting priority srcnat; oifname "${publicIf}" masquerade${kind === 'symmetric' ? ' fully-random' : ''}; }
}
table inet meshp_lab_fw {
  chain input { type filter hook input priority filter; policy accept; iifname "${publicIf}" ct state new drop; }
  chain forward { type filter hook forward priority filter; policy accept; iifname "${publicIf}" ct state new drop; }
}
`;
}

export interface NatBed {
  p0: LabNode;
  sites: Site[];
}

export interface SiteNet {
  /** The site's one machine, alone on its router's LAN. */
  ns: Netns;
  router: Netns;
  publicIp: string;
  kind: NatKind;
}

export interface NatNet {
  /** The public segment's bridge's namespace. */
  under: Netns;
  /** p0's namespace: the public side's one machine. */
  p0: Netns;
  sites: SiteNet[];
  /** Another machine on the public segment (`name`, its address's last byte). */
  machine(name: string, last: number): Promise<Netns>;
}

/**
 * The namespaces alone: the public segment with p0 (P0_IP) and router i (PUBLIC_NET.i), site i's
 * machine on 192.168.i.2 behind it, routed by it, its NAT of `kinds[i - 1]`. What runs on them is
 * the caller's (natBed: the tunnel plugin fed by the test; nat-mesh.test.ts: a real controller and agents).
 */
export async function natNet(t: Teardown, prefix: string, kinds: NatKind[]): Promise<NatNet> {
  const { under, machine } = await underlay(t, prefix);
  const p0 = await machine('p0', P0_IP, 10);
  const sites: SiteNet[] = [];
  for (const [k, kind] of kinds.entries()) {
    const i = k + 1;
    const publicIp = `${PUBLIC_NET}.${i}`;
    const router = await machine(`r${i}`, publicIp, i);
    const ns = await netns(t, `${prefix}s${i}`);
    await wire(ns, `192.168.${i}.2/24`, router, `192.168.${i}.1/24`, `${prefix}l${i}`);
    await ns.exec('ip', ['route', 'add', 'default', 'via', `192.168.${i}.1`]);
    // Per namespace: this router's own forwarding, nothing of the machine's.
    await router.exec('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
    await router.exec('nft', ['-f', '-'], natRuleset(`${prefix}v${i}a`, kind));
    sites.push({ ns, router, publicIp, kind });
  }
  return { under, p0, sites, machine: (name, last) => machine(name, `${PUBLIC_NET}.${last}`, last) };
}

/** `tag`: the namespaces' prefix (a random suffix follows), so two labs at once never share a name. */
export async function natBed(t: Teardown, kinds: NatKind[], tag = 'nat'): Promise<NatBed> {
  const prefix = runPrefix(tag);
  const root = mkdtempSync(join(tmpdir(), 'meshp-nat-'));
  const nodes: LabNode[] = [];
  t.teardown(async () => {
    for (const n of nodes) await n.kill().catch(() => undefined);
    for (const n of nodes) {
      const pid = n.wireguardGoPid();
      if (pid && alive(pid)) {
        process.kill(pid, 'SIGTERM');
        for (let i = 0; i < 100 && alive(pid); i++) await new Promise((r) => setTimeout(r, 50));
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
      rmSync(`/var/run/wireguard/${n.ifname}.sock`, { force: true });
    }
    rmSync(root, { recursive: true, force: true });
  });
  const net = await natNet(t, prefix, kinds);
  const p0 = new LabNode('p0', 10, net.p0, prefix, root);
  nodes.push(p0);
  const sites = net.sites.map((s, k): Site => {
    const node = new LabNode(`s${k + 1}`, k + 1, s.ns, prefix, root);
    nodes.push(node);
    return { node, router: s.router, publicIp: s.publicIp, kind: s.kind };
  });
  return { p0, sites };
}

export const TURN_PORT = 3478;

export interface Coturn {
  /** Its log, one line each. */
  lines: string[];
  /** SIGKILL by pid: the relay dies without a word, forgetting every allocation. */
  kill(): Promise<void>;
  /** Started again (after kill), listening before it resolves. */
  start(): Promise<void>;
}

/**
 * Debian's coturn in p0's namespace: `use-auth-secret` with `secret` (TURN REST API credentials),
 * relay ports 49160-49200 on the public address (`o`: another port and relay range, for a second
 * coturn beside it; `extra`: more of its options). Killed by its pid in teardown.
 */
export async function coturn(
  t: Teardown,
  p0: { ns: Netns },
  secret: string,
  o: { port?: number; minPort?: number; maxPort?: number; extra?: string[] } = {},
): Promise<Coturn> {
  const port = o.port ?? TURN_PORT;
  const extra = o.extra ?? [];
  let child: ChildProcess | null = null;
  const lines: string[] = [];
  const args = ['-n', '--listening-ip', P0_IP, '--listening-port', String(port), '--relay-ip', P0_IP, '--use-auth-secret', `--static-auth-secret=${secret}`];
  args.push(
    '--realm',
    'meshp.lab',
    '--no-tls',
    '--no-dtls',
    '--no-cli',
    '--min-port',
    String(o.minPort ?? 49160),
    '--max-port',
    String(o.maxPort ?? 49200),
    '--log-file',
    'stdout',
    '--simple-log',
    '--pidfile',
    '',
    ...extra,
  );
  const stop = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null || !c.pid) return;
    const gone = new Promise((r) => c.once('exit', r));
    process.kill(c.pid, 'SIGKILL');
    await gone;
  };
  t.teardown(stop);
  const start = async () => {
    const [cmd, argv] = p0.ns.wrap('turnserver', args);
    child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    createInterface({ input: child.stdout! }).on('line', (l) => lines.push(l));
    await until('coturn listening', async () => (await p0.ns.exec('ss', ['-uln'])).stdout.includes(`${P0_IP}:${port}`), 20, 200);
  };
  await start();
  return { lines, kill: stop, start };
}

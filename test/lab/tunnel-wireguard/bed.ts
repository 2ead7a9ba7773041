/**
 * The tunnel lab: N namespaces joined only by an underlay (one bridge in its own namespace, a veth
 * from each node), each running `node.mjs` (the tunnel plugin and a delta applier) inside its
 * namespace, fed view changes by the test. Every process is killed by its pid in teardown, each
 * wireguard-go too (pid from the plugin's pid file), its socket removed, the namespaces deleted.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Peer, StateDelta } from '@meshp/core';
import { netns, runPrefix, sh, type Netns } from '../../helpers/netns.js';

const NODE_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'node.mjs');
export const RANGE = '10.99.0.0/24';
export const PORT = 7000;
/** A port each node serves that no policy rule ever allows. */
export const OTHER_PORT = 7001;
export const WG_PORT = 51820;

interface Teardown {
  teardown(fn: () => unknown): void;
}

export type Reply = Record<string, unknown> & { msg: string; id?: number };

export class LabNode {
  readonly mesh: string;
  readonly underlay: string;
  readonly ifname: string;
  readonly stateDir: string;
  publicKey = '';
  proc: ChildProcess | null = null;
  lines: Reply[] = [];
  stderr = '';
  #seq = 0;
  #waiters: (() => void)[] = [];

  constructor(
    readonly name: string,
    readonly index: number,
    readonly ns: Netns,
    prefix: string,
    root: string,
  ) {
    this.mesh = `10.99.0.${index}`;
    this.underlay = `10.98.0.${index}`;
    this.ifname = `${prefix}w${index}`;
    this.stateDir = join(root, name);
  }

  /** Starts (or restarts) the node's process inside its namespace; resolves at `ready`. `extra`: more plugin options (node.mjs). */
  async start(graceMs: number, extra: { directTrials?: { firstMs?: number; capMs?: number; windowMs?: number } } = {}): Promise<Reply> {
    const conf = { name: this.name, ifname: this.ifname, stateDir: this.stateDir, graceMs, serve: [PORT, OTHER_PORT], privateRange: RANGE, ...extra };
    const [cmd, args] = this.ns.wrap(process.execPath, [NODE_SCRIPT, JSON.stringify(conf)]);
    const child = spawn(cmd, args, { stdio: ['pipe', 'pipe', 'pipe'] });
    this.proc = child;
    this.lines = [];
    let buf = '';
    child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          this.lines.push(JSON.parse(line) as Reply);
        } catch {
          this.lines.push({ msg: line });
        }
      }
      for (const w of this.#waiters.splice(0)) w();
    });
    child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString('utf8')));
    child.once('exit', () => {
      for (const w of this.#waiters.splice(0)) w();
    });
    const ready = await this.#wait((l) => l.msg === 'ready');
    this.publicKey = String(ready.publicKey);
    return ready;
  }

  get alive(): boolean {
    return !!this.proc && this.proc.exitCode === null && this.proc.signalCode === null;
  }

  /** SIGKILL by pid: the agent dies without a word (wireguard-go, its own process group, stays). */
  async kill(): Promise<void> {
    const p = this.proc;
    if (!p || !this.alive) return;
    const gone = new Promise((r) => p.once('exit', r));
    process.kill(p.pid!, 'SIGKILL');
    await gone;
  }

  async request(op: Record<string, unknown>, timeoutMs = 30_000): Promise<Reply> {
    const id = ++this.#seq;
    this.proc!.stdin!.write(JSON.stringify({ ...op, id }) + '\n');
    return this.#wait((l) => l.id === id && l.msg !== 'tunnel change refused', timeoutMs);
  }

  async delta(delta: StateDelta): Promise<Reply> {
    const r = await this.request({ op: 'delta', delta });
    const tunnel = r.tunnel as { lastError: string | null };
    if (tunnel.lastError) throw new Error(`${this.name}: the tunnel refused the delta: ${tunnel.lastError}`);
    return r;
  }

  /** A TCP connection from this node to `to` over the tunnel, answered by `to`'s server. */
  async reaches(to: LabNode, port = PORT): Promise<boolean> {
    const r = await this.request({ op: 'connect', host: to.mesh, port, timeoutMs: 1500 });
    return r.ok === true;
  }

  /** What the interface holds, from `wg show IF dump` (keys → last handshake, seconds). */
  async wgPeers(): Promise<Map<string, number>> {
    const { stdout } = await this.ns.exec('wg', ['show', this.ifname, 'dump']);
    const rows = stdout.trim().split('\n').slice(1).filter(Boolean);
    return new Map(rows.map((r) => r.split('\t')).map((f) => [f[0]!, Number(f[4])]));
  }

  wireguardGoPid(): number | null {
    try {
      return Number(readFileSync(join(this.stateDir, `${this.ifname}.pid`), 'utf8').trim()) || null;
    } catch {
      return null;
    }
  }

  async #wait(pred: (l: Reply) => boolean, timeoutMs = 30_000): Promise<Reply> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.lines.find(pred);
      if (hit) return hit;
      if (!this.alive) throw new Error(`${this.name} exited; stderr: ${this.stderr}; last: ${JSON.stringify(this.lines.slice(-3))}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${this.name}: no answer in time; last: ${JSON.stringify(this.lines.slice(-3))}; stderr: ${this.stderr}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 500));
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** N nodes on one underlay bridge; nothing else joins them. */
export async function tunnelLab(t: Teardown, count: number): Promise<LabNode[]> {
  const prefix = runPrefix('twg');
  const root = mkdtempSync(join(tmpdir(), 'meshp-twg-'));
  const nodes: LabNode[] = [];
  // Registered first, so it runs whatever fails after: processes by pid, then sockets and folders.
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
  const under = await netns(t, `${prefix}u`);
  await under.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);
  await under.exec('ip', ['link', 'set', 'br0', 'up']);
  for (let i = 1; i <= count; i++) {
    const ns = await netns(t, `${prefix}n${i}`);
    const a = `${prefix}v${i}a`;
    const b = `${prefix}v${i}b`;
    await sh('ip', ['link', 'add', a, 'type', 'veth', 'peer', 'name', b]);
    await sh('ip', ['link', 'set', a, 'netns', ns.name]);
    await sh('ip', ['link', 'set', b, 'netns', under.name]);
    await ns.exec('ip', ['addr', 'add', `10.98.0.${i}/24`, 'dev', a]);
    await ns.exec('ip', ['link', 'set', a, 'up']);
    await under.exec('ip', ['link', 'set', b, 'master', 'br0', 'up']);
    nodes.push(new LabNode(`n${i}`, i, ns, prefix, root));
  }
  return nodes;
}

/** The peer `of` as `to`'s view carries it. */
export function peerOf(of: LabNode, tags: string[], inboundOnly = false): Peer {
  return {
    id: of.name,
    nodeKey: `ed25519-${of.name}`,
    addresses: [of.mesh],
    tags,
    endpoints: [`${of.underlay}:${WG_PORT}`],
    inboundOnly,
    tunnelKey: of.publicKey,
  };
}

export function tunnelOf(n: LabNode) {
  return { address: n.mesh, listenPort: WG_PORT, mtu: 1380, keepaliveSeconds: 25 };
}

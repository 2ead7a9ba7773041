/**
 * One WireGuard interface, whichever implementation carries it: the kernel's (configured with `wg`,
 * which speaks netlink) or wireguard-go's (configured on its UAPI socket). Either way a change is
 * one call with only the peers it touches, never a process per peer.
 */
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { keyToHex } from './keys.js';
import { run } from './exec.js';
import { removeLines, upsertLines, type PeerConfig } from './peer-config.js';
import { uapiGet, uapiSet, type DevicePeer, type DeviceState } from './uapi.js';
import { WireguardGo } from './wireguard-go.js';

export type Implementation = 'kernel' | 'wireguard-go';

export type PeerOp = { remove: string } | { upsert: PeerConfig };

export interface DeviceChange {
  privateKey?: string;
  listenPort?: number;
  peers: PeerOp[];
}

export interface Device {
  readonly ifname: string;
  readonly implementation: Implementation;
  /** wireguard-go's pid; null for the kernel's. */
  readonly pid: number | null;
  /** Whether `up` found the interface already running (an agent restart). */
  readonly adopted: boolean;
  up(): Promise<void>;
  set(change: DeviceChange): Promise<void>;
  get(): Promise<DeviceState>;
  /** Tears the interface down: wireguard-go stopped by pid, the kernel link deleted. */
  down(): Promise<void>;
}

export function uapiLines(change: DeviceChange): string[] {
  const lines: string[] = [];
  if (change.privateKey) lines.push(`private_key=${keyToHex(change.privateKey)}`);
  if (change.listenPort !== undefined) lines.push(`listen_port=${change.listenPort}`);
  for (const op of change.peers) lines.push(...('remove' in op ? removeLines(op.remove) : upsertLines(op.upsert)));
  return lines;
}

export class UserspaceDevice implements Device {
  readonly implementation = 'wireguard-go' as const;
  readonly #proc: WireguardGo;
  #adopted = false;

  constructor(
    readonly ifname: string,
    stateDir: string,
    binary?: string,
  ) {
    this.#proc = new WireguardGo({ ifname, stateDir, ...(binary ? { binary } : {}) });
  }

  get pid(): number | null {
    return this.#proc.pid;
  }

  get adopted(): boolean {
    return this.#adopted;
  }

  async up(): Promise<void> {
    this.#adopted = (await this.#proc.ensure()).adopted;
  }

  set(change: DeviceChange): Promise<void> {
    return uapiSet(this.#proc.socket, uapiLines(change));
  }

  get(): Promise<DeviceState> {
    return uapiGet(this.#proc.socket);
  }

  down(): Promise<void> {
    return this.#proc.stop();
  }
}

/** In the state folder: this folder's plugin made the kernel link of that name (a leave deletes only such a link). */
export const madeMark = (stateDir: string, ifname: string): string => join(stateDir, `${ifname}.made`);

function markMade(stateDir: string | undefined, ifname: string): void {
  if (!stateDir) return;
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  writeFileSync(madeMark(stateDir, ifname), 'kernel\n', { mode: 0o600 });
}

/** Kernel WireGuard (not on the lab machines: no module there; see the README). */
export class KernelDevice implements Device {
  readonly implementation = 'kernel' as const;
  readonly pid = null;
  #adopted = false;

  constructor(
    readonly ifname: string,
    readonly keyFile: string,
    readonly stateDir?: string,
  ) {}

  get adopted(): boolean {
    return this.#adopted;
  }

  async up(): Promise<void> {
    this.#adopted = await linkExists(this.ifname);
    if (this.#adopted) return;
    try {
      await run('ip', ['link', 'add', this.ifname, 'type', 'wireguard']);
      markMade(this.stateDir, this.ifname);
    } catch (e) {
      // The kernel has no WireGuard (no module): said as unavailable, with the way out.
      const said = e instanceof Error ? e.message.replace(/^[^:]*: /, '') : String(e);
      throw new MeshpError(
        'MESHP_TUNNEL_UNAVAILABLE',
        `kernel WireGuard: ip link add ${this.ifname} type wireguard: ${said} (no wireguard module? implementation wireguard-go runs in userspace)`,
        { cause: e },
      );
    }
  }

  async set(change: DeviceChange): Promise<void> {
    const args = ['set', this.ifname];
    if (change.privateKey) args.push('private-key', this.keyFile);
    if (change.listenPort !== undefined) args.push('listen-port', String(change.listenPort));
    for (const op of change.peers) {
      if ('remove' in op) args.push('peer', op.remove, 'remove');
      else {
        const p = op.upsert;
        args.push('peer', p.publicKey, 'allowed-ips', p.allowedIps.join(','), 'persistent-keepalive', String(p.keepalive));
        if (p.endpoint) args.push('endpoint', p.endpoint);
      }
    }
    if (args.length > 2) await run('wg', args);
  }

  async get(): Promise<DeviceState> {
    return parseDump(await run('wg', ['show', this.ifname, 'dump']));
  }

  async down(): Promise<void> {
    if (await linkExists(this.ifname)) await run('ip', ['link', 'del', this.ifname]);
    if (this.stateDir) rmSync(madeMark(this.stateDir, this.ifname), { force: true });
  }
}

/** `wg show IF dump`: the interface's line, then one line per peer, tab-separated. */
export function parseDump(text: string): DeviceState {
  const [head, ...rows] = text.trim().split('\n');
  const h = (head ?? '').split('\t');
  const peers: DevicePeer[] = rows.filter(Boolean).map((r) => {
    const f = r.split('\t');
    return {
      publicKey: f[0]!,
      ...(f[2] && f[2] !== '(none)' ? { endpoint: f[2] } : {}),
      allowedIps: f[3] && f[3] !== '(none)' ? f[3].split(',') : [],
      lastHandshake: Number(f[4] ?? 0),
      rxBytes: Number(f[5] ?? 0),
      txBytes: Number(f[6] ?? 0),
      persistentKeepalive: f[7] === 'off' ? 0 : Number(f[7] ?? 0),
    };
  });
  return { listenPort: Number(h[2] ?? 0), ...(h[0] && h[0] !== '(none)' ? { privateKey: h[0] } : {}), peers };
}

export async function linkExists(ifname: string): Promise<boolean> {
  try {
    await run('ip', ['link', 'show', 'dev', ifname]);
    return true;
  } catch {
    return false;
  }
}

/** Kernel where the module answers, else wireguard-go; a running wireguard-go for the name is kept. */
export async function openDevice(o: {
  ifname: string;
  stateDir: string;
  keyFile: string;
  implementation: 'auto' | Implementation;
  binary?: string;
}): Promise<Device> {
  const user = new UserspaceDevice(o.ifname, o.stateDir, o.binary);
  if (o.implementation === 'wireguard-go') return user;
  if (o.implementation === 'kernel') return new KernelDevice(o.ifname, o.keyFile, o.stateDir);
  if (new WireguardGo({ ifname: o.ifname, stateDir: o.stateDir }).running() !== null) return user;
  if (await linkExists(o.ifname)) {
    const info = JSON.parse(await run('ip', ['-d', '-j', 'link', 'show', 'dev', o.ifname])) as { linkinfo?: { info_kind?: string } }[];
    return info[0]?.linkinfo?.info_kind === 'wireguard' ? new KernelDevice(o.ifname, o.keyFile, o.stateDir) : user;
  }
  try {
    await run('ip', ['link', 'add', o.ifname, 'type', 'wireguard']);
    markMade(o.stateDir, o.ifname);
    return new KernelDevice(o.ifname, o.keyFile, o.stateDir);
  } catch {
    return user;
  }
}

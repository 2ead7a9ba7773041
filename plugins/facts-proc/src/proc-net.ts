/**
 * Listening sockets read from /proc/net/{tcp,tcp6,udp,udp6}: the network namespace of the
 * reading process, which is the machine the host runs on (a lab namespace in tests). Each socket's
 * inode is matched with /proc/PID/fd to name its process.
 */
import { promises as fs } from 'node:fs';
import type { Listener, Protocol } from '@meshp/core';

const TCP_LISTEN = '0A';
const TCP_ESTABLISHED = '01';
const UDP_UNCONNECTED = '07';

function ipv4(hex: string): string {
  const n = parseInt(hex, 16);
  return [n & 255, (n >>> 8) & 255, (n >>> 16) & 255, (n >>> 24) & 255].join('.');
}

function ipv6(hex: string): string {
  // Four 32-bit words, each in host (little-endian) order.
  const bytes: number[] = [];
  for (let w = 0; w < 4; w++) {
    const word = hex.slice(w * 8, w * 8 + 8);
    for (let b = 3; b >= 0; b--) bytes.push(parseInt(word.slice(b * 2, b * 2 + 2), 16));
  }
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((bytes[i]! << 8) | bytes[i + 1]!).toString(16));
  const text = groups.join(':');
  const zeros = text.match(/(^|:)0(:0)+(:|$)/g);
  if (!zeros) return text;
  const longest = zeros.reduce((a, b) => (b.length > a.length ? b : a));
  return text.replace(longest, '::').replace(/:::+/, '::');
}

export interface RawSocket extends Listener {
  inode: string;
}

export function parseProcNet(text: string, protocol: Protocol, family: 4 | 6): RawSocket[] {
  const out: RawSocket[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10) continue;
    const [addrHex, portHex] = f[1]!.split(':');
    const state = f[3];
    if (protocol === 'tcp' ? state !== TCP_LISTEN : state !== UDP_UNCONNECTED) continue;
    out.push({
      protocol,
      family,
      address: family === 4 ? ipv4(addrHex!) : ipv6(addrHex!),
      port: parseInt(portHex!, 16),
      inode: f[9]!,
    });
  }
  return out;
}

/** A TCP connection established on this machine: its local end, and whether the far end is this machine too. */
export interface Established {
  family: 4 | 6;
  address: string;
  port: number;
  loopback: boolean;
}

const isLoopback = (a: string) => a.startsWith('127.') || a === '::1' || a.startsWith('::ffff:127.');

export function parseEstablished(text: string, family: 4 | 6): Established[] {
  const out: Established[] = [];
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== TCP_ESTABLISHED) continue;
    const [localHex, localPort] = f[1]!.split(':');
    const [remoteHex] = f[2]!.split(':');
    const addr = (hex: string) => (family === 4 ? ipv4(hex) : ipv6(hex));
    out.push({ family, address: addr(localHex!), port: parseInt(localPort!, 16), loopback: isLoopback(addr(remoteHex!)) });
  }
  return out;
}

/**
 * Connections from another machine established to a listening TCP socket: those on its port and its
 * family, at its address (or any, for a wildcard bind). A session from loopback is not counted: no
 * filter on the way in cuts it.
 */
export function establishedTo(l: Pick<Listener, 'protocol' | 'family' | 'address' | 'port'>, conns: readonly Established[]): number {
  if (l.protocol !== 'tcp') return 0;
  const wildcard = l.address === '0.0.0.0' || l.address === '::';
  return conns.filter((c) => !c.loopback && c.family === l.family && c.port === l.port && (wildcard || c.address === l.address)).length;
}

interface Owner {
  pid: number;
  process: string;
}

/** The socket inodes a process holds open (readlink of each of its fds). */
async function socketsOf(pid: string): Promise<Set<string>> {
  const held = new Set<string>();
  const fds = await fs.readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
  for (const fd of fds) {
    const m = /^socket:\[(\d+)\]$/.exec(await fs.readlink(`/proc/${pid}/fd/${fd}`).catch(() => ''));
    if (m) held.add(m[1]!);
  }
  return held;
}

const comm = async (pid: string): Promise<string> => (await fs.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '?')).trim();

/** Every socket inode of every process: one readlink per open fd on the machine. */
async function scanAll(): Promise<Map<string, Owner>> {
  const map = new Map<string, Owner>();
  const pids = (await fs.readdir('/proc')).filter((d) => /^\d+$/.test(d));
  await Promise.all(
    pids.map(async (pid) => {
      const held = await socketsOf(pid);
      if (!held.size) return;
      const name = await comm(pid);
      for (const inode of held) {
        // A socket shared by a parent and its forked children is named by the parent: the lowest pid.
        const known = map.get(inode);
        if (!known || Number(pid) < known.pid) map.set(inode, { pid: Number(pid), process: name });
      }
    }),
  );
  return map;
}

/**
 * Who holds each listening socket. Reading every fd of every process costs one readlink per open fd
 * on the machine (tens of milliseconds on a busy server, every reconcile), so an owner found once is
 * remembered by the socket's inode and re-checked in that one process only; the whole machine is
 * read again only when a listening socket is new or its remembered owner no longer holds it. A
 * socket no visible process holds (another pid namespace) is remembered as ownerless until then.
 */
const remembered = new Map<string, Owner | null>();

async function owners(inodes: ReadonlySet<string>, rescan: boolean): Promise<Map<string, Owner>> {
  if (rescan) remembered.clear();
  const found = new Map<string, Owner | null>();
  const byPid = new Map<number, string[]>();
  let stale = false;
  for (const inode of inodes) {
    const o = remembered.get(inode);
    if (o === undefined) stale = true;
    else if (o === null) found.set(inode, null);
    else byPid.set(o.pid, [...(byPid.get(o.pid) ?? []), inode]);
  }
  for (const [pid, list] of byPid) {
    if (stale) break;
    const held = await socketsOf(String(pid));
    const name = held.size ? await comm(String(pid)) : '';
    for (const inode of list) {
      if (held.has(inode)) found.set(inode, { pid, process: name });
      else stale = true;
    }
  }
  if (stale) {
    const all = await scanAll();
    for (const inode of inodes) found.set(inode, all.get(inode) ?? null);
  }
  remembered.clear();
  for (const [inode, o] of found) remembered.set(inode, o);
  const out = new Map<string, Owner>();
  for (const [inode, o] of found) if (o) out.set(inode, o);
  return out;
}

/** `rescan` forgets the remembered owners and reads every process's fds (the baseline in bench/). */
export async function listening(opts: { rescan?: boolean } = {}): Promise<Listener[]> {
  const tables: [string, Protocol, 4 | 6][] = [
    ['/proc/net/tcp', 'tcp', 4],
    ['/proc/net/tcp6', 'tcp', 6],
    ['/proc/net/udp', 'udp', 4],
    ['/proc/net/udp6', 'udp', 6],
  ];
  const raw: RawSocket[] = [];
  const conns: Established[] = [];
  for (const [file, protocol, family] of tables) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    raw.push(...parseProcNet(text, protocol, family));
    if (protocol === 'tcp') conns.push(...parseEstablished(text, family));
  }
  const who = await owners(new Set(raw.map((r) => r.inode)), opts.rescan === true);
  const seen = new Set<string>();
  const out: Listener[] = [];
  for (const { inode, ...s } of raw) {
    const key = `${s.protocol}/${s.address}/${s.port}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const o = who.get(inode);
    const established = establishedTo(s, conns);
    out.push({ ...s, ...(o ? { pid: o.pid, process: o.process } : {}), ...(established ? { established } : {}) });
  }
  return out.sort((a, b) => a.port - b.port || a.protocol.localeCompare(b.protocol) || a.family - b.family);
}

/**
 * Listening sockets read from /proc/net/{tcp,tcp6,udp,udp6}: the network namespace of the
 * reading process, which is the machine the host runs on (a lab namespace in tests). Each socket's
 * inode is matched with /proc/PID/fd to name its process.
 */
import { promises as fs } from 'node:fs';
import type { Listener, Protocol } from '@meshp/core';

const TCP_LISTEN = '0A';
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
      protocol, family,
      address: family === 4 ? ipv4(addrHex!) : ipv6(addrHex!),
      port: parseInt(portHex!, 16),
      inode: f[9]!,
    });
  }
  return out;
}

async function owners(): Promise<Map<string, { pid: number; process: string }>> {
  const map = new Map<string, { pid: number; process: string }>();
  const pids = (await fs.readdir('/proc')).filter((d) => /^\d+$/.test(d));
  await Promise.all(
    pids.map(async (pid) => {
      const fds = await fs.readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
      let comm: string | undefined;
      for (const fd of fds) {
        const link = await fs.readlink(`/proc/${pid}/fd/${fd}`).catch(() => '');
        const m = /^socket:\[(\d+)\]$/.exec(link);
        if (!m) continue;
        comm ??= (await fs.readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '?')).trim();
        // A socket shared by a parent and its forked children is named by the parent: the lowest pid.
        const known = map.get(m[1]!);
        if (!known || Number(pid) < known.pid) map.set(m[1]!, { pid: Number(pid), process: comm });
      }
    }),
  );
  return map;
}

export async function listening(): Promise<Listener[]> {
  const tables: [string, Protocol, 4 | 6][] = [
    ['/proc/net/tcp', 'tcp', 4], ['/proc/net/tcp6', 'tcp', 6], ['/proc/net/udp', 'udp', 4], ['/proc/net/udp6', 'udp', 6],
  ];
  const raw: RawSocket[] = [];
  for (const [file, protocol, family] of tables) {
    const text = await fs.readFile(file, 'utf8').catch(() => '');
    raw.push(...parseProcNet(text, protocol, family));
  }
  const who = await owners();
  const seen = new Set<string>();
  const out: Listener[] = [];
  for (const { inode, ...s } of raw) {
    const key = `${s.protocol}/${s.address}/${s.port}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const o = who.get(inode);
    out.push(o ? { ...s, pid: o.pid, process: o.process } : s);
  }
  return out.sort((a, b) => a.port - b.port || a.protocol.localeCompare(b.protocol) || a.family - b.family);
}

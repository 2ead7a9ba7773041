/**
 * The cross-platform configuration protocol of WireGuard (the UAPI `set=1` / `get=1` text protocol)
 * on a userspace implementation's socket: one connection, one request, one answer per call.
 * https://www.wireguard.com/xplatform/
 */
import { createConnection } from 'node:net';
import { MeshpError } from '@meshp/core';
import { keyFromHex } from './keys.js';

export const SOCKET_DIR = '/var/run/wireguard';
export const socketPath = (ifname: string, dir = SOCKET_DIR): string => `${dir}/${ifname}.sock`;

/** One peer as `get=1` answers it. Keys in base64. */
export interface DevicePeer {
  publicKey: string;
  endpoint?: string;
  allowedIps: string[];
  /** Seconds since the epoch; 0: never. */
  lastHandshake: number;
  persistentKeepalive: number;
  rxBytes: number;
  txBytes: number;
}

export interface DeviceState {
  listenPort: number;
  /** base64; absent when none is set. */
  privateKey?: string;
  peers: DevicePeer[];
}

/** Sends one request and resolves with the lines before `errno=`; a non-zero errno is refused. */
export function uapiCall(path: string, request: string, timeoutMs = 10_000): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const sock = createConnection({ path });
    let buf = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new MeshpError('MESHP_TUNNEL_FAILED', `the WireGuard socket ${path} did not answer in ${timeoutMs} ms`));
    }, timeoutMs);
    sock.setEncoding('utf8');
    sock.on('error', (e) => {
      clearTimeout(timer);
      reject(new MeshpError('MESHP_TUNNEL_FAILED', `the WireGuard socket ${path}: ${e.message}`, { cause: e }));
    });
    sock.on('data', (d: string) => {
      buf += d;
      const end = buf.indexOf('\n\n');
      if (end < 0) return;
      clearTimeout(timer);
      sock.end();
      const lines = buf.slice(0, end).split('\n');
      const errno = lines.pop() ?? '';
      if (errno !== 'errno=0') {
        reject(new MeshpError('MESHP_TUNNEL_FAILED', `the WireGuard device refused the configuration (${errno || 'no errno'})`, { details: { errno } }));
      } else resolve(lines);
    });
    sock.write(request);
  });
}

/** `set=1` with these lines (already in UAPI form); nothing is sent for none. */
export async function uapiSet(path: string, lines: string[]): Promise<void> {
  if (lines.length === 0) return;
  await uapiCall(path, `set=1\n${lines.join('\n')}\n\n`);
}

export async function uapiGet(path: string): Promise<DeviceState> {
  return parseGet(await uapiCall(path, 'get=1\n\n'));
}

export function parseGet(lines: string[]): DeviceState {
  const out: DeviceState = { listenPort: 0, peers: [] };
  let peer: DevicePeer | null = null;
  for (const line of lines) {
    const eq = line.indexOf('=');
    if (eq < 0) continue;
    const k = line.slice(0, eq);
    const v = line.slice(eq + 1);
    if (k === 'public_key') {
      peer = { publicKey: keyFromHex(v), allowedIps: [], lastHandshake: 0, persistentKeepalive: 0, rxBytes: 0, txBytes: 0 };
      out.peers.push(peer);
      continue;
    }
    if (!peer) {
      if (k === 'listen_port') out.listenPort = Number(v);
      else if (k === 'private_key') out.privateKey = keyFromHex(v);
      continue;
    }
    if (k === 'endpoint') peer.endpoint = v;
    else if (k === 'allowed_ip') peer.allowedIps.push(v);
    else if (k === 'last_handshake_time_sec') peer.lastHandshake = Number(v);
    else if (k === 'persistent_keepalive_interval') peer.persistentKeepalive = Number(v);
    else if (k === 'rx_bytes') peer.rxBytes = Number(v);
    else if (k === 'tx_bytes') peer.txBytes = Number(v);
  }
  return out;
}

/**
 * A node's tunnel moved to another interface name, on purpose (`meshp agent --tunnel-move`): the
 * key goes with it (its file renamed, never a new one), the old interface is taken down first (its
 * wireguard-go stopped by its pid, or its kernel link deleted, and its nft table removed), so the new
 * one binds the same port and its peers see the same key. Nothing is moved when the old interface
 * has no key here: a key this node never made is not taken.
 */
import { existsSync, readFileSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { linkExists } from './device.js';
import { run } from './exec.js';
import { TunnelFilter } from './filter.js';
import { publicKeyOf } from './keys.js';
import { WireguardGo } from './wireguard-go.js';

export interface MovedTunnel {
  from: string;
  to: string;
  publicKey: string;
  /** What was taken down: `wireguard-go (pid N)`, `kernel link`, or nothing running. */
  stopped: string;
}

export async function moveTunnel(o: { stateDir: string; from: string; to: string }): Promise<MovedTunnel> {
  const [fromKey, toKey] = [join(o.stateDir, `${o.from}.key`), join(o.stateDir, `${o.to}.key`)];
  if (!existsSync(fromKey)) throw new MeshpError('MESHP_TUNNEL_MISMATCH', `no key for ${o.from} in ${o.stateDir}: nothing to move to ${o.to}`);
  const publicKey = publicKeyOf(readFileSync(fromKey, 'utf8').trim());
  if (existsSync(toKey) && publicKeyOf(readFileSync(toKey, 'utf8').trim()) !== publicKey) {
    throw new MeshpError(
      'MESHP_TUNNEL_MISMATCH',
      `${toKey} holds another key already: moving ${o.from} to ${o.to} would swap the node's key (remove that file first if it is not needed)`,
    );
  }
  // Down first: the new interface binds the same UDP port.
  let stopped = 'nothing running';
  const proc = new WireguardGo({ ifname: o.from, stateDir: o.stateDir });
  const pid = proc.running();
  if (pid !== null) {
    await proc.stop();
    stopped = `wireguard-go (pid ${pid})`;
  } else if (await linkExists(o.from)) {
    const info = JSON.parse(await run('ip', ['-d', '-j', 'link', 'show', 'dev', o.from])) as { linkinfo?: { info_kind?: string } }[];
    if (info[0]?.linkinfo?.info_kind !== 'wireguard')
      throw new MeshpError('MESHP_TUNNEL_MISMATCH', `${o.from} is not a WireGuard interface this node runs: not taken down`);
    await run('ip', ['link', 'del', o.from]);
    stopped = 'kernel link';
  }
  await run('nft', ['-f', '-'], new TunnelFilter(o.from).deleteTable().join('\n') + '\n').catch(() => undefined);
  renameSync(fromKey, toKey);
  const grace = join(o.stateDir, `${o.from}.grace.json`);
  if (existsSync(grace)) renameSync(grace, join(o.stateDir, `${o.to}.grace.json`));
  return { from: o.from, to: o.to, publicKey, stopped };
}

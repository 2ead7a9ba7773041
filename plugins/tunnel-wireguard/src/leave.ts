/**
 * The tunnel's part when the node leaves its network (core's `leave` hook): what this plugin raised
 * goes — wireguard-go (by the pid in the state folder, checked against its argv: never another
 * process), the interface it carried with its addresses and routes, a kernel link only when this
 * state folder made it (its `.made` mark), and the interface's own nft table (`meshp_wg_…`, the
 * mesh's by name). Anything else of that name stays, said as kept. The key stays in the state folder.
 * Works in a fresh process (`meshp agent leave`, nothing attached) as in the running agent.
 */
import { existsSync, rmSync } from 'node:fs';
import type { Leaving } from '@meshp/core';
import { linkExists, madeMark, type Device } from './device.js';
import { run } from './exec.js';
import { tableName, TunnelFilter } from './filter.js';
import { WireguardGo, alive } from './wireguard-go.js';

export interface TunnelLeave {
  ifname: string;
  stateDir: string;
  /** The device the running plugin holds, if attached. */
  device: Device | null;
  graceFile: string;
}

const tableExists = (table: string) =>
  run('nft', ['list', 'table', 'inet', table]).then(
    () => true,
    () => false,
  );

export async function leaveTunnel(o: TunnelLeave, l: Leaving): Promise<void> {
  const proc = new WireguardGo({ ifname: o.ifname, stateDir: o.stateDir });
  // The running plugin's own process if it still lives, else the one the pid file names (a fresh process: `meshp agent leave`).
  const held = o.device?.implementation === 'wireguard-go' && o.device.pid !== null && alive(o.device.pid) ? o.device : null;
  const pid = held?.pid ?? proc.running();
  const made = existsSync(madeMark(o.stateDir, o.ifname));
  const link = await linkExists(o.ifname);
  const table = tableName(o.ifname);
  const hasTable = await tableExists(table);
  if (pid !== null) l.removed.push(`wireguard-go (pid ${pid}) and its interface ${o.ifname}, with the mesh address and route on it`);
  else if (made && link) l.removed.push(`interface ${o.ifname} (kernel WireGuard, made by the mesh), with the mesh address and route on it`);
  else if (link) l.kept.push(`interface ${o.ifname}: this state folder did not make it`);
  if (hasTable) l.removed.push(`nft table inet ${table}`);
  if (l.preview) return;
  if (pid !== null) {
    await (held ? held.down() : proc.stop());
    // wireguard-go takes its TUN device with it; one left behind by a kill is the mesh's all the same.
    if (await linkExists(o.ifname)) await run('ip', ['link', 'del', o.ifname]);
  } else if (made && link) {
    await run('ip', ['link', 'del', o.ifname]);
  }
  rmSync(madeMark(o.stateDir, o.ifname), { force: true });
  if (hasTable) await run('nft', ['-f', '-'], new TunnelFilter(o.ifname).deleteTable().join('\n') + '\n');
  rmSync(o.graceFile, { force: true });
  // The pid file and socket went with proc.stop(); the key stays: the state folder is the operator's record.
}

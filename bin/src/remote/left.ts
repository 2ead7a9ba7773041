/**
 * A state folder whose node left the network (removed by the controller, or \`meshp agent leave\`) is
 * refused before anything else about it is decided — the tunnel it recorded included — so its agent
 * exits with the status a unit does not restart, whatever else changed since.
 */
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { LEFT_KEY, leftRefusal, type LeftRecord } from '@meshp/core/agent';
import { Host } from '@meshp/core/host';
import { SqliteStatePlugin } from '@meshp/state-sqlite';

/** Throws MESHP_REMOVED when the node of this state folder left; a folder never used passes. */
export async function refuseIfLeft(stateDir: string): Promise<void> {
  if (!existsSync(join(stateDir, 'host.db'))) return;
  const h = new Host({ root: '/', stateDir, firewall: 'none' }).use(new SqliteStatePlugin());
  let left: LeftRecord | null;
  try {
    left = await (await h.state()).getValue<LeftRecord>(LEFT_KEY);
  } finally {
    await h.close();
  }
  if (left) throw leftRefusal(left);
}

/**
 * Firewall managers this plugin does not speak, recognised by their enabled config under the root
 * (their nftables footprint, firewalld's table, is classify.ts's): a manager seen means no driver
 * is offered, and the host refuses with MESHP_FIREWALL_UNKNOWN. The iptables plugin reads the same
 * files and also the managers' iptables chains.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { managersInConfigRead, managersRunningRead, type ManagerSeen } from '@meshp/core';

export type { ManagerSeen };

/** Managers enabled by their config under the root, or running (the process table under the root): core's one list, read from this root. */
export async function managersInConfig(root: string): Promise<ManagerSeen[]> {
  const read = (path: string) => readFile(join(root, path), 'utf8').catch(() => null);
  const list = (path: string) => readdir(join(root, path)).catch(() => []);
  // Enabled by config, or running now (a daemon rewrites the rules at its next reload whatever its config says).
  const [config, running] = await Promise.all([managersInConfigRead(read), managersRunningRead(list, read)]);
  const by = new Map<string, string[]>();
  for (const m of [...config, ...running]) by.set(m.kind, [...(by.get(m.kind) ?? []), m.seen]);
  return [...by].map(([kind, seen]) => ({ kind, seen: seen.join('; ') }));
}

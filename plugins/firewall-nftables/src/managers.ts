/**
 * Firewall managers this plugin does not speak, recognised by their enabled config under the root
 * (their nftables footprint, firewalld's table, is classify.ts's): a manager seen means no driver
 * is offered, and the host refuses with MESHP_FIREWALL_UNKNOWN. The iptables plugin reads the same
 * files and also the managers' iptables chains.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { managersSeen, type ManagerSeen } from '@meshp/core/lifecycle';

export type { ManagerSeen };

/** Managers enabled by their config under the root, or running (the process table under the root): core's one list, read from this root. */
export function managersInConfig(root: string): Promise<ManagerSeen[]> {
  return managersSeen(
    (path) => readFile(join(root, path), 'utf8').catch(() => null),
    (path) => readdir(join(root, path)).catch(() => []),
  );
}

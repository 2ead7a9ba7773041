/**
 * Firewall managers this plugin does not speak, recognised by their enabled config under the root
 * (their nftables footprint, firewalld's table, is classify.ts's): a manager seen means no driver
 * is offered, and the host refuses with MESHP_FIREWALL_UNKNOWN. The iptables plugin reads the same
 * files and also the managers' iptables chains.
 */
import { readdir, readFile, readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { managersSeen, type ManagerSeen } from '@meshp/core/lifecycle';
import type { Runner } from './runner.js';

export type { ManagerSeen };

/**
 * Managers enabled by their config under the root, or running (the process table under the root):
 * core's one list, read from this root. A daemon counts only in the network namespace the
 * runner's commands run in (its `/proc/self/ns/net`); when that cannot be read, every one counts.
 */
export async function managersInConfig(root: string, runner?: Runner): Promise<ManagerSeen[]> {
  const own = runner ? await runner(['readlink', '/proc/self/ns/net']).catch(() => null) : null;
  const net =
    own && own.code === 0 && own.stdout.trim()
      ? { own: own.stdout.trim(), of: (pid: number) => readlink(join(root, 'proc', String(pid), 'ns/net')).catch(() => null) }
      : undefined;
  return managersSeen(
    (path) => readFile(join(root, path), 'utf8').catch(() => null),
    (path) => readdir(join(root, path)).catch(() => []),
    net,
  );
}

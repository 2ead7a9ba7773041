/**
 * Firewall managers this plugin does not speak, recognised by their enabled config under the root
 * (their nftables footprint, firewalld's table, is classify.ts's): a manager seen means no driver
 * is offered, and the host refuses with MESHP_FIREWALL_UNKNOWN. The iptables plugin reads the same
 * files and also the managers' iptables chains.
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';

export interface ManagerSeen {
  /** The kind reported to the host: firewalld, ufw, shorewall, csf. */
  kind: string;
  /** What was seen, for the operator. */
  seen: string;
}

async function text(path: string): Promise<string | null> {
  return readFile(path, 'utf8').catch(() => null);
}

/** Managers enabled by their config under the root (a manager not running now loads its rules at the next boot). */
export async function managersInConfig(root: string): Promise<ManagerSeen[]> {
  const out: ManagerSeen[] = [];
  const wants = (unit: string) => text(join(root, 'etc/systemd/system/multi-user.target.wants', unit)).then((t) => t !== null);
  if ((await text(join(root, 'etc/firewalld/firewalld.conf'))) !== null && (await wants('firewalld.service'))) {
    out.push({ kind: 'firewalld', seen: 'etc/firewalld/firewalld.conf, firewalld.service enabled' });
  }
  const ufw = await text(join(root, 'etc/ufw/ufw.conf'));
  if (ufw !== null && /^\s*ENABLED\s*=\s*yes\b/m.test(ufw)) out.push({ kind: 'ufw', seen: 'etc/ufw/ufw.conf ENABLED=yes' });
  const shorewall = await text(join(root, 'etc/shorewall/shorewall.conf'));
  if (shorewall !== null && /^\s*STARTUP_ENABLED\s*=\s*Yes\b/im.test(shorewall)) out.push({ kind: 'shorewall', seen: 'etc/shorewall/shorewall.conf STARTUP_ENABLED=Yes' });
  const csf = await text(join(root, 'etc/csf/csf.conf'));
  if (csf !== null) out.push({ kind: 'csf', seen: 'etc/csf/csf.conf' });
  return out;
}

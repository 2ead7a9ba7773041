/**
 * Firewall managers no core plugin speaks, recognised by their enabled config under the root (a
 * manager not running now loads its rules at the next boot). Both firewall plugins ask this; the
 * file reading is theirs (core has no I/O): `read` answers a path under the root, or null.
 */
export interface ManagerSeen {
  /** The kind reported to the host: firewalld, ufw, shorewall, csf. */
  kind: string;
  /** What was seen, for the operator. */
  seen: string;
}

export async function managersInConfig(read: (path: string) => Promise<string | null>): Promise<ManagerSeen[]> {
  const out: ManagerSeen[] = [];
  const wants = (unit: string) => read(`etc/systemd/system/multi-user.target.wants/${unit}`).then((t) => t !== null);
  if ((await read('etc/firewalld/firewalld.conf')) !== null && (await wants('firewalld.service'))) {
    out.push({ kind: 'firewalld', seen: 'etc/firewalld/firewalld.conf, firewalld.service enabled' });
  }
  const ufw = await read('etc/ufw/ufw.conf');
  if (ufw !== null && /^\s*ENABLED\s*=\s*yes\b/m.test(ufw)) out.push({ kind: 'ufw', seen: 'etc/ufw/ufw.conf ENABLED=yes' });
  const shorewall = await read('etc/shorewall/shorewall.conf');
  if (shorewall !== null && /^\s*STARTUP_ENABLED\s*=\s*Yes\b/im.test(shorewall)) out.push({ kind: 'shorewall', seen: 'etc/shorewall/shorewall.conf STARTUP_ENABLED=Yes' });
  const csf = await read('etc/csf/csf.conf');
  if (csf !== null) out.push({ kind: 'csf', seen: 'etc/csf/csf.conf' });
  return out;
}

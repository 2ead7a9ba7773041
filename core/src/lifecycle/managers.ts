/**
 * Firewall managers no core plugin speaks, recognised by their enabled config under the root (a
 * manager not running now loads its rules at the next boot): firewalld, ufw, Shorewall, csf and
 * Proxmox VE's pve-firewall. Both firewall plugins ask this; the
 * file reading is theirs (core has no I/O): `read` answers a path under the root, or null.
 */
export interface ManagerSeen {
  /** The kind reported to the host: firewalld, ufw, shorewall, csf, pve-firewall. */
  kind: string;
  /** What was seen, for the operator. */
  seen: string;
}

/** Managers enabled by their config under the root, read through the plugin's own I/O (as managersRunningRead). */
export async function managersEnabledRead(
  read: (path: string) => Promise<string | null>,
  list: (path: string) => Promise<string[]> = async () => [],
): Promise<ManagerSeen[]> {
  const out: ManagerSeen[] = [];
  const wants = (unit: string) => read(`etc/systemd/system/multi-user.target.wants/${unit}`).then((t) => t !== null);
  if ((await read('etc/firewalld/firewalld.conf')) !== null && (await wants('firewalld.service'))) {
    out.push({ kind: 'firewalld', seen: 'etc/firewalld/firewalld.conf, firewalld.service enabled' });
  }
  const ufw = await read('etc/ufw/ufw.conf');
  if (ufw !== null && /^\s*ENABLED\s*=\s*yes\b/m.test(ufw)) out.push({ kind: 'ufw', seen: 'etc/ufw/ufw.conf ENABLED=yes' });
  const shorewall = await read('etc/shorewall/shorewall.conf');
  if (shorewall !== null && /^\s*STARTUP_ENABLED\s*=\s*Yes\b/im.test(shorewall))
    out.push({ kind: 'shorewall', seen: 'etc/shorewall/shorewall.conf STARTUP_ENABLED=Yes' });
  const csf = await read('etc/csf/csf.conf');
  if (csf !== null) out.push({ kind: 'csf', seen: 'etc/csf/csf.conf' });
  // Proxmox VE: a firewall file (the cluster's cluster.fw, a guest's VMID.fw, a node's host.fw) with `enable: 1` in its [OPTIONS].
  const pveFiles = [
    ...(await list('etc/pve/firewall'))
      .filter((n) => n.endsWith('.fw'))
      .sort()
      .map((n) => `etc/pve/firewall/${n}`),
    ...(await list('etc/pve/nodes')).map((n) => `etc/pve/nodes/${n}/host.fw`),
  ];
  for (const fw of pveFiles) {
    const text = await read(fw);
    if (text !== null && pveEnabled(text)) {
      out.push({ kind: 'pve-firewall', seen: `${fw} enable: 1` });
      break;
    }
  }
  return out;
}

/** Whether a Proxmox VE firewall file's [OPTIONS] section says `enable: 1`. */
function pveEnabled(text: string): boolean {
  let options = false;
  for (const line of text.split('\n')) {
    const section = /^\s*\[([^\]]+)\]/.exec(line);
    if (section) options = section[1]!.trim().toUpperCase() === 'OPTIONS';
    else if (options && /^\s*enable\s*:\s*1\b/.test(line)) return true;
  }
  return false;
}

/**
 * Managers seen running, from the process table (argv of each process, as /proc/PID/cmdline holds
 * it): a daemon running now rewrites the firewall at its next reload whatever its config says.
 * firewalld runs as `python3 … /usr/sbin/firewalld`; csf's daemon renames itself `lfd - sleeping`.
 */
const DAEMONS: { kind: string; test: (argv: readonly string[]) => boolean }[] = [
  {
    kind: 'firewalld',
    // The program itself, or the script its python interpreter runs (not `grep firewalld`).
    test: (argv) =>
      /(^|\/)firewalld$/.test(argv[0] ?? '') || (/(^|\/)python[\d.]*$/.test(argv[0] ?? '') && argv.slice(1, 4).some((a) => /(^|\/)firewalld$/.test(a))),
  },
  { kind: 'csf', test: (argv) => /^lfd\b/.test(argv[0] ?? '') || (argv[0] ?? '').endsWith('/lfd') },
  // Proxmox VE's daemon is a perl script that names itself `pve-firewall` once started.
  {
    kind: 'pve-firewall',
    test: (argv) =>
      /^pve-firewall\b/.test(argv[0] ?? '') ||
      (argv[0] ?? '').endsWith('/pve-firewall') ||
      (/(^|\/)perl$/.test(argv[0] ?? '') && argv.slice(1, 4).some((a) => /(^|\/)pve-firewall$/.test(a))),
  },
];

export function managersRunning(processes: readonly { pid: number; argv: readonly string[] }[]): ManagerSeen[] {
  return DAEMONS.flatMap((d) => {
    const hit = processes.find((p) => d.test(p.argv));
    return hit ? [{ kind: d.kind, seen: `process ${hit.pid} (${hit.argv.join(' ').slice(0, 80)}) running` }] : [];
  });
}

/**
 * The node's own network namespace, to tell its daemons from those of containers and other
 * namespaces on the same machine: `own` as /proc/PID/ns/net names it (`net:[4026531992]`), and
 * `of` a process's, null when it cannot be read.
 */
export interface NetOf {
  own: string;
  of: (pid: number) => Promise<string | null>;
}

/**
 * managersRunning over the process table under the root (`proc/PID/cmdline`), read through the
 * plugin's own I/O. With `net`, only a daemon in the node's own network namespace counts: a
 * firewalld in a container (or another test's namespace) rewrites that namespace's rules, not the
 * node's. One whose namespace cannot be read still counts (the careful side).
 */
export async function managersRunningRead(
  list: (path: string) => Promise<string[]>,
  read: (path: string) => Promise<string | null>,
  net?: NetOf,
): Promise<ManagerSeen[]> {
  const pids = (await list('proc')).filter((n) => /^\d+$/.test(n));
  const processes = await Promise.all(
    pids.map(async (pid) => ({ pid: Number(pid), argv: ((await read(`proc/${pid}/cmdline`)) ?? '').split('\0').filter(Boolean) })),
  );
  const candidates = processes.filter((p) => p.argv.length > 0 && DAEMONS.some((d) => d.test(p.argv)));
  const mine = await Promise.all(
    candidates.map(async (p) => {
      if (!net) return true;
      const ns = await net.of(p.pid);
      return ns === null || ns === net.own;
    }),
  );
  return managersRunning(candidates.filter((_, i) => mine[i]));
}

/**
 * Managers enabled by their config, or running now (a daemon rewrites the rules at its next reload
 * whatever its config says), one entry per kind with every sighting: what both firewall plugins ask,
 * through their own reading of the root.
 */
export async function managersSeen(
  read: (path: string) => Promise<string | null>,
  list: (path: string) => Promise<string[]>,
  net?: NetOf,
): Promise<ManagerSeen[]> {
  const [config, running] = await Promise.all([managersEnabledRead(read, list), managersRunningRead(list, read, net)]);
  const by = new Map<string, string[]>();
  for (const m of [...config, ...running]) by.set(m.kind, [...(by.get(m.kind) ?? []), m.seen]);
  return [...by].map(([kind, seen]) => ({ kind, seen: seen.join('; ') }));
}

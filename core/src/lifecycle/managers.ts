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

/** Managers enabled by their config under the root, read through the plugin's own I/O (as managersRunningRead). */
export async function managersEnabledRead(read: (path: string) => Promise<string | null>): Promise<ManagerSeen[]> {
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
  return out;
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
];

export function managersRunning(processes: readonly { pid: number; argv: readonly string[] }[]): ManagerSeen[] {
  return DAEMONS.flatMap((d) => {
    const hit = processes.find((p) => d.test(p.argv));
    return hit ? [{ kind: d.kind, seen: `process ${hit.pid} (${hit.argv.join(' ').slice(0, 80)}) running` }] : [];
  });
}

/** managersRunning over the process table under the root (`proc/PID/cmdline`), read through the plugin's own I/O. */
export async function managersRunningRead(list: (path: string) => Promise<string[]>, read: (path: string) => Promise<string | null>): Promise<ManagerSeen[]> {
  const pids = (await list('proc')).filter((n) => /^\d+$/.test(n));
  const processes = await Promise.all(
    pids.map(async (pid) => ({ pid: Number(pid), argv: ((await read(`proc/${pid}/cmdline`)) ?? '').split('\0').filter(Boolean) })),
  );
  return managersRunning(processes.filter((p) => p.argv.length > 0));
}

/**
 * Managers enabled by their config, or running now (a daemon rewrites the rules at its next reload
 * whatever its config says), one entry per kind with every sighting: what both firewall plugins ask,
 * through their own reading of the root.
 */
export async function managersSeen(read: (path: string) => Promise<string | null>, list: (path: string) => Promise<string[]>): Promise<ManagerSeen[]> {
  const [config, running] = await Promise.all([managersEnabledRead(read), managersRunningRead(list, read)]);
  const by = new Map<string, string[]>();
  for (const m of [...config, ...running]) by.set(m.kind, [...(by.get(m.kind) ?? []), m.seen]);
  return [...by].map(([kind, seen]) => ({ kind, seen: seen.join('; ') }));
}

/**
 * NetworkManager as a resolver manager (issue 25), read from its own files under the root, never
 * written: whether it runs (its run folder holds the resolv.conf it generates, or its pid file) and
 * whether it manages `/etc/resolv.conf` — its `[main]` `dns=` (`none`: it leaves DNS alone) and
 * `rc-manager=` (`unmanaged`: it never writes the file), from `NetworkManager.conf` then each
 * `conf.d/*.conf` in name order, the last word winning as NetworkManager reads them. A machine whose
 * `/etc/resolv.conf` is a plain file with no header is NetworkManager's when it runs and manages it:
 * the mesh would otherwise take it for a plain file, and NetworkManager would write over it.
 */

export interface NetworkManagerDns {
  running: boolean;
  /** What ran it seen by: `run/NetworkManager/resolv.conf`. */
  runSeen: string;
  /** `[main] dns=`, `default` when unset. */
  dns: string;
  /** `[main] rc-manager=`, `auto` when unset. */
  rcManager: string;
  /** Whether it writes `/etc/resolv.conf`: running, dns not none, rc-manager not unmanaged. */
  manages: boolean;
}

const RUN = ['run/NetworkManager/resolv.conf', 'run/NetworkManager/NetworkManager.pid'];

/** `key=` of `[main]` in a keyfile text, or undefined when it does not say. */
function mainKey(text: string, key: string): string | undefined {
  let section = '';
  let value: string | undefined;
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#') || line.startsWith(';')) continue;
    const s = /^\[(.+)\]$/.exec(line);
    if (s) section = s[1]!.trim();
    else if (section === 'main') {
      const m = /^([^=]+)=(.*)$/.exec(line);
      if (m && m[1]!.trim() === key) value = m[2]!.trim();
    }
  }
  return value;
}

export async function networkManagerDns(read: (path: string) => Promise<string | null>, list: (dir: string) => Promise<string[]>): Promise<NetworkManagerDns> {
  let runSeen = '';
  for (const p of RUN) if (!runSeen && (await read(p)) !== null) runSeen = p;
  const files = [
    'etc/NetworkManager/NetworkManager.conf',
    ...(await list('etc/NetworkManager/conf.d'))
      .filter((n) => n.endsWith('.conf'))
      .sort()
      .map((n) => `etc/NetworkManager/conf.d/${n}`),
  ];
  let dns = 'default';
  let rcManager = 'auto';
  for (const f of files) {
    const text = await read(f);
    if (text === null) continue;
    dns = mainKey(text, 'dns') ?? dns;
    rcManager = mainKey(text, 'rc-manager') ?? rcManager;
  }
  const running = runSeen !== '';
  return { running, runSeen, dns, rcManager, manages: running && dns !== 'none' && rcManager !== 'unmanaged' };
}

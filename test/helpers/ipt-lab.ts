/**
 * A lab bed for the iptables kinds: a server namespace whose found firewall (loaded from a
 * rules.v4/rules.v6 under a temp root) allows 8080 and drops the rest; a client on the private
 * subnet 10.71.1.0/24, a machine outside on 10.71.2.0/24, and a "container" namespace behind the
 * server on 10.71.3.0/24 whose port 8080 is published as the server's 18080 by a DNAT rule.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { localRunner } from '@meshp/firewall-iptables';
import { netns, runPrefix, sh, wire, type Netns, type Teardownable } from './netns.js';

export type Backend = 'legacy' | 'nft';

export const ADDR = {
  server: '10.71.1.1',
  client: '10.71.1.2',
  serverOut: '10.71.2.1',
  outside: '10.71.2.2',
  box: '10.71.3.2',
  server6: 'fd71:1::1',
  client6: 'fd71:1::2',
  privateRange: '10.71.1.0/24',
} as const;

export const RULES_V4 = `# found firewall, as an administrator wrote it
*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate INVALID -j DROP
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp --dport 8080 -j ACCEPT
-A INPUT -p icmp -j ACCEPT
-A INPUT -p tcp -j REJECT --reject-with tcp-reset
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
`;

export const RULES_V6 = `*filter
:INPUT DROP [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -i lo -j ACCEPT
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p ipv6-icmp -j ACCEPT
-A INPUT -p tcp --dport 8080 -j ACCEPT
COMMIT
`;

/** What Docker would add: its chains, its jumps, an accept for the published port. Not in the config. */
export const DOCKERISH = `*filter
:DOCKER - [0:0]
:DOCKER-USER - [0:0]
-A DOCKER-USER -j RETURN
-I FORWARD 1 -j DOCKER-USER
-I FORWARD 2 -j DOCKER
-A DOCKER -d ${ADDR.box}/32 -p tcp -m tcp --dport 8080 -j ACCEPT
COMMIT
`;

export function tool(backend: Backend, family: 4 | 6, op: 'save' | 'restore'): string {
  return `${family === 6 ? 'ip6' : 'ip'}tables-${backend}-${op}`;
}

export interface IptLab {
  backend: Backend;
  server: Netns;
  client: Netns;
  outside: Netns;
  box: Netns;
  root: string;
  configV4: string;
  configV6: string;
  /** iptables-save of a table, without the comment lines (they carry dates). */
  save(family?: 4 | 6, table?: string): Promise<string>;
  /** Loads the config the way netfilter-persistent does (its tables flushed and reloaded). */
  reload(): Promise<void>;
  /** Loads extra rules into the server with --noflush. */
  add(text: string, family?: 4 | 6): Promise<void>;
  serve(ns: Netns, port: number): Promise<void>;
  /** A real TCP connection and an HTTP answer, with a one second timeout. */
  reach(from: Netns, host: string, port: number): Promise<boolean>;
  configHash(): Promise<string>;
}

export async function iptLab(t: Teardownable, backend: Backend, opts: { dockerish?: boolean } = {}): Promise<IptLab> {
  const p = runPrefix('iq');
  const server = await netns(t, `${p}s`);
  const client = await netns(t, `${p}c`);
  const outside = await netns(t, `${p}o`);
  const box = await netns(t, `${p}k`);
  await wire(server, `${ADDR.server}/24`, client, `${ADDR.client}/24`, `${p}1`);
  await wire(server, `${ADDR.serverOut}/24`, outside, `${ADDR.outside}/24`, `${p}2`);
  await wire(server, '10.71.3.1/24', box, `${ADDR.box}/24`, `${p}3`);
  await sh('ip', ['-n', server.name, '-6', 'addr', 'add', `${ADDR.server6}/64`, 'dev', `${p}1a`, 'nodad']);
  await sh('ip', ['-n', client.name, '-6', 'addr', 'add', `${ADDR.client6}/64`, 'dev', `${p}1b`, 'nodad']);
  await sh('ip', ['-n', box.name, 'route', 'add', 'default', 'via', '10.71.3.1']);
  await server.exec('sysctl', ['-q', '-w', 'net.ipv4.ip_forward=1']);

  const root = await mkdtemp(join(tmpdir(), `${p}-root-`));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'etc/iptables'), { recursive: true });
  const configV4 = join(root, 'etc/iptables/rules.v4');
  const configV6 = join(root, 'etc/iptables/rules.v6');
  await writeFile(configV4, RULES_V4);
  await writeFile(configV6, RULES_V6);
  const www = join(root, 'www');
  await mkdir(www);
  await writeFile(join(www, 'index.html'), 'lab\n');

  const children = reaper(t);
  const lab: IptLab = {
    backend,
    server,
    client,
    outside,
    box,
    root,
    configV4,
    configV6,
    async save(family = 4, table) {
      const { stdout } = await server.exec(tool(backend, family, 'save'), table ? ['-t', table] : []);
      return stdout
        .split('\n')
        .filter((l) => !l.startsWith('#'))
        .map((l) => l.replace(/ \[\d+:\d+\]$/, ' [0:0]'))
        .join('\n');
    },
    async reload() {
      await server.exec(tool(backend, 4, 'restore'), [configV4]);
      await server.exec(tool(backend, 6, 'restore'), [configV6]);
    },
    async add(text, family = 4) {
      await server.exec(tool(backend, family, 'restore'), ['--noflush'], text);
    },
    async serve(ns, port) {
      children.push(await httpd(ns, port, www));
    },
    reach,
    async configHash() {
      const h = createHash('sha256');
      h.update(await readFile(configV4));
      h.update(await readFile(configV6));
      return h.digest('hex');
    },
  };
  await lab.reload();
  await lab.add(`*nat\n-A PREROUTING -p tcp -m tcp --dport 18080 -j DNAT --to-destination ${ADDR.box}:8080\nCOMMIT\n`);
  if (opts.dockerish) await lab.add(DOCKERISH);
  await lab.serve(server, 8080);
  await lab.serve(server, 9090);
  await lab.serve(box, 8080);
  return lab;
}

/** busybox httpd on [::]:port inside a namespace, waited for until it listens. Kill it by its pid. */
export async function httpd(ns: Netns, port: number, www: string): Promise<ChildProcess> {
  const child = spawn('nsenter', [`--net=${ns.path}`, '--', 'busybox', 'httpd', '-f', '-p', `[::]:${port}`, '-h', www], { stdio: 'ignore' });
  const hex = port.toString(16).toUpperCase().padStart(4, '0');
  for (let i = 0; i < 50; i++) {
    const { stdout } = await ns.exec('cat', ['/proc/net/tcp6']);
    if (stdout.includes(`:${hex} 00000000000000000000000000000000:0000 0A`)) return child;
    await new Promise((r) => setTimeout(r, 50));
  }
  if (child.pid) process.kill(child.pid, 'SIGKILL');
  throw new Error(`httpd on ${port} in ${ns.name} did not start`);
}

/** A real TCP connection and an HTTP answer, with a one second timeout. */
export async function reach(from: Netns, host: string, port: number): Promise<boolean> {
  const r = await localRunner(['nsenter', `--net=${from.path}`, '--'])('busybox', ['nc', '-w', '1', host, String(port)], 'GET / HTTP/1.0\r\n\r\n');
  return r.stdout.includes('HTTP/1.');
}

/** Kills, at teardown, the processes a test started (by pid). */
export function reaper(t: Teardownable): ChildProcess[] {
  const children: ChildProcess[] = [];
  t.teardown(async () => {
    for (const c of children) {
      if (c.exitCode === null && c.signalCode === null && c.pid) {
        const gone = new Promise((r) => c.once('exit', r));
        process.kill(c.pid, 'SIGKILL');
        await gone;
      }
    }
  });
  return children;
}

/** Lines present in `after` and not in `before` (and the reverse), as multisets. */
export function lineDiff(before: string, after: string): { added: string[]; removed: string[] } {
  const count = (s: string) => {
    const m = new Map<string, number>();
    for (const l of s.split('\n').filter(Boolean)) m.set(l, (m.get(l) ?? 0) + 1);
    return m;
  };
  const b = count(before);
  const a = count(after);
  const added: string[] = [];
  const removed: string[] = [];
  for (const [l, n] of a) for (let i = 0; i < n - (b.get(l) ?? 0); i++) added.push(l);
  for (const [l, n] of b) for (let i = 0; i < n - (a.get(l) ?? 0); i++) removed.push(l);
  return { added, removed };
}

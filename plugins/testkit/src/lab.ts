/**
 * The kit's lab: three network namespaces a test owns — a `server` (where the firewall under test
 * lives), a `client` on the private range and an `outside` machine on another subnet — with a root
 * folder for the server's config files. Everything is removed at teardown, also when a check fails.
 * It never touches the machine's own firewall, routes or namespaces.
 */
import { execFile, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import type { Teardown } from './kit-test.js';

const run = promisify(execFile);

export const ADDRESSES = Object.freeze({
  server: '10.79.1.1',
  client: '10.79.1.2',
  privateRange: '10.79.1.0/24',
  serverOutside: '10.79.2.1',
  outside: '10.79.2.2',
});

export interface Namespace {
  readonly name: string;
  /** /var/run/netns/NAME, for `nsenter --net=PATH` runners. */
  readonly path: string;
  exec(cmd: string, args: string[], input?: string): Promise<{ stdout: string; stderr: string }>;
}

export interface KitLab {
  server: Namespace;
  client: Namespace;
  outside: Namespace;
  /** The server's root prefix: its config files live under it (e.g. `${root}/etc/nftables.conf`). */
  root: string;
  /** Serves HTTP on `port` in the server until teardown (busybox httpd). */
  serve(port: number): Promise<void>;
  /** A real TCP connect from `from` to the server: on the private range, or from outside. */
  reaches(from: 'client' | 'outside', port: number): Promise<boolean>;
}

async function sh(cmd: string, args: string[], input?: string): Promise<{ stdout: string; stderr: string }> {
  if (input === undefined) return run(cmd, args, { maxBuffer: 64 << 20 });
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      err ? reject(Object.assign(err, { stdout, stderr })) : resolve({ stdout, stderr }),
    );
    child.stdin?.end(input);
  });
}

function namespace(name: string): Namespace {
  const path = `/var/run/netns/${name}`;
  return { name, path, exec: (cmd, args, input) => sh('nsenter', [`--net=${path}`, '--', cmd, ...args], input) };
}

/** Root, `ip netns` and busybox are what the lab needs; a check is skipped (saying why) without them. */
export function labUnavailable(): string | null {
  if (process.getuid?.() !== 0) return 'the lab builds network namespaces: run as root';
  if (!existsSync('/usr/bin/busybox') && !existsSync('/bin/busybox')) return 'the lab serves HTTP with busybox (apt install busybox-static)';
  return null;
}

export async function lab(t: Teardown): Promise<KitLab> {
  const prefix = `kt${randomBytes(3).toString('hex')}`;
  const make = async (suffix: string) => {
    const name = `${prefix}${suffix}`;
    await sh('ip', ['netns', 'add', name]);
    t.teardown(() => sh('ip', ['netns', 'del', name]).catch(() => undefined));
    await sh('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    return namespace(name);
  };
  const server = await make('s');
  const client = await make('c');
  const outside = await make('o');
  const wire = async (peer: Namespace, serverAddr: string, peerAddr: string, link: string) => {
    await sh('ip', ['link', 'add', `${link}a`, 'netns', server.name, 'type', 'veth', 'peer', 'name', `${link}b`, 'netns', peer.name]);
    await sh('ip', ['-n', server.name, 'addr', 'add', `${serverAddr}/24`, 'dev', `${link}a`]);
    await sh('ip', ['-n', peer.name, 'addr', 'add', `${peerAddr}/24`, 'dev', `${link}b`]);
    await sh('ip', ['-n', server.name, 'link', 'set', `${link}a`, 'up']);
    await sh('ip', ['-n', peer.name, 'link', 'set', `${link}b`, 'up']);
    await sh('ip', ['-n', peer.name, 'route', 'add', 'default', 'via', serverAddr]);
  };
  await wire(client, ADDRESSES.server, ADDRESSES.client, `${prefix}1`);
  await wire(outside, ADDRESSES.serverOutside, ADDRESSES.outside, `${prefix}2`);
  const root = await mkdtemp(join(tmpdir(), `${prefix}-root-`));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'etc'), { recursive: true });
  const www = join(root, 'www');
  await mkdir(www);
  await writeFile(join(www, 'index.html'), 'ok\n');

  return {
    server,
    client,
    outside,
    root,
    async serve(port) {
      const child = spawn('nsenter', [`--net=${server.path}`, '--', 'busybox', 'httpd', '-f', '-p', String(port), '-h', www], { stdio: 'ignore' });
      const pid = child.pid;
      t.teardown(() => {
        if (pid !== undefined && child.exitCode === null) process.kill(pid, 'SIGTERM');
      });
      for (let i = 0; i < 100; i++) {
        if ((await server.exec('ss', ['-Htln', `sport = :${port}`])).stdout.trim()) return;
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`nothing listens on ${port} in the server namespace`);
    },
    async reaches(from, port) {
      const [ns, address] = from === 'client' ? [client, ADDRESSES.server] : [outside, ADDRESSES.serverOutside];
      return ns
        .exec('timeout', ['1', 'bash', '-c', `exec 3<>/dev/tcp/${address}/${port}`])
        .then(() => true)
        .catch(() => false);
    },
  };
}

/**
 * The lab bed of docs/firewalls.md for the nftables kind: a "server" namespace whose found firewall
 * (table inet filter, loaded from <root>/etc/nftables.conf) allows 8080 and drops the rest, a
 * "client" on the private subnet, an "outside" machine on another subnet, and an "app" behind a
 * DNAT standing in for a published container port (18080 → app:80).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, mkdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { netns, runPrefix, sh, wire, type Netns, type Teardownable } from './netns.js';

export const SERVER_CLIENT = '10.70.1.1';
export const CLIENT = '10.70.1.2';
export const CLIENT_NET = '10.70.1.0/24';
export const SERVER_OUTSIDE = '10.70.2.1';
export const OUTSIDE = '10.70.2.2';
export const APP = '10.70.3.2';
export const SERVER6 = 'fd70:1::1';
export const CLIENT6_NET = 'fd70:1::/64';
export const PUBLISHED = 18080;

export const FOUND_CONFIG = `#!/usr/sbin/nft -f
flush ruleset

table inet filter {
\tset admins {
\t\ttype ipv4_addr
\t\tflags interval
\t\telements = { 192.0.2.0/24 }
\t}

\tchain input {
\t\ttype filter hook input priority filter; policy drop;
\t\tct state established,related accept
\t\tct state invalid drop
\t\tiif "lo" accept
\t\tip saddr @admins tcp dport 22 accept
\t\ttcp dport 8080 accept
\t\tmeta l4proto ipv6-icmp accept
\t\tcounter reject
\t}

\tchain forward {
\t\ttype filter hook forward priority filter; policy drop;
\t\tct state established,related accept
\t}
}
`;

/** Docker's own NAT (nftables backend naming), standing in for a published container port. */
export const DOCKER_NAT = `table ip docker-bridges {
\tchain prerouting {
\t\ttype nat hook prerouting priority dstnat; policy accept;
\t\ttcp dport ${PUBLISHED} dnat to ${APP}:80
\t}
}
`;

export interface Lab {
  prefix: string;
  server: Netns;
  client: Netns;
  outside: Netns;
  app: Netns;
  root: string;
  configFile: string;
  nft(args: string[]): Promise<string>;
  /** Loads a file of nft syntax in the server namespace. */
  load(text: string): Promise<void>;
  /** The found firewall's reload: `nft -f /etc/nftables.conf` (flush ruleset first). */
  reload(): Promise<void>;
  serve(ns: Netns, port: number): Promise<void>;
}

/** `prefix`: the namespaces', links' and files' names begin with it (at most 6 characters; a fresh one of `nq` by default). */
export async function lab(t: Teardownable, opts: { app?: boolean; prefix?: string } = {}): Promise<Lab> {
  const prefix = opts.prefix ?? runPrefix('nq');
  const server = await netns(t, `${prefix}s`);
  const client = await netns(t, `${prefix}c`);
  const outside = await netns(t, `${prefix}o`);
  const app = opts.app ? await netns(t, `${prefix}a`) : server;
  await wire(server, `${SERVER_CLIENT}/24`, client, `${CLIENT}/24`, `${prefix}1`);
  await wire(server, `${SERVER_OUTSIDE}/24`, outside, `${OUTSIDE}/24`, `${prefix}2`);
  await sh('ip', ['-n', server.name, '-6', 'addr', 'add', `${SERVER6}/64`, 'dev', `${prefix}1a`, 'nodad']);
  await sh('ip', ['-n', client.name, '-6', 'addr', 'add', 'fd70:1::2/64', 'dev', `${prefix}1b`, 'nodad']);
  await sh('ip', ['-n', client.name, 'route', 'add', 'default', 'via', SERVER_CLIENT]);
  await sh('ip', ['-n', outside.name, 'route', 'add', 'default', 'via', SERVER_OUTSIDE]);
  if (opts.app) {
    await wire(server, '10.70.3.1/24', app, `${APP}/24`, `${prefix}3`);
    await sh('ip', ['-n', app.name, 'route', 'add', 'default', 'via', '10.70.3.1']);
    await server.exec('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);
  }
  const root = await mkdtemp(join(tmpdir(), `${prefix}-root-`));
  t.teardown(() => rm(root, { recursive: true, force: true }));
  await mkdir(join(root, 'etc'), { recursive: true });
  const configFile = join(root, 'etc/nftables.conf');
  await writeFile(configFile, FOUND_CONFIG);
  const www = join(root, 'www');
  await mkdir(www);
  await writeFile(join(www, 'index.html'), 'ok\n');

  const loadText = async (text: string) => {
    const file = join(root, `load-${Date.now()}-${Math.random().toString(16).slice(2)}.nft`);
    await writeFile(file, text);
    await server.exec('nft', ['-f', file]);
    await rm(file);
  };
  const l: Lab = {
    prefix,
    server,
    client,
    outside,
    app,
    root,
    configFile,
    nft: async (args) => (await server.exec('nft', args)).stdout,
    load: loadText,
    reload: async () => {
      await server.exec('nft', ['-f', configFile]);
    },
    serve: async (ns, port) => {
      const [cmd, args] = ns.wrap('busybox', ['httpd', '-f', '-p', String(port), '-h', www]);
      const child = spawn(cmd, args, { stdio: 'ignore' });
      const pid = child.pid;
      t.teardown(() => {
        if (pid !== undefined && child.exitCode === null) process.kill(pid, 'SIGTERM');
      });
      await waitListening(ns, port);
    },
  };
  await l.reload();
  return l;
}

async function waitListening(ns: Netns, port: number): Promise<void> {
  for (let i = 0; i < 50; i++) {
    const { stdout } = await ns.exec('ss', ['-Htln', `sport = :${port}`]);
    if (stdout.trim()) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`nothing listens on ${port} in ${ns.name}`);
}

/** A real TCP connect from a namespace; false when refused or silent for `seconds`. */
export async function reachable(from: Netns, host: string, port: number, seconds = 1): Promise<boolean> {
  return from
    .exec('timeout', [String(seconds), 'bash', '-c', `exec 3<>/dev/tcp/${host}/${port}`])
    .then(() => true)
    .catch(() => false);
}

/** The ruleset as comparable lines: every object with its statements; handles and counter values left out. */
export async function ruleLines(l: Lab): Promise<string[]> {
  const { theirs, mesh } = await splitLines(l);
  return [...theirs, ...mesh];
}

/**
 * The ruleset's lines (see ruleLines) split in two: what lives in the mesh's own table (inet
 * meshp: its refusals and its batch receipt) and everything else.
 */
export async function splitLines(l: Lab): Promise<{ theirs: string[]; mesh: string[] }> {
  const doc = JSON.parse(await l.nft(['-j', 'list', 'ruleset'])) as { nftables: Record<string, Record<string, unknown>>[] };
  const out = { theirs: [] as string[], mesh: [] as string[] };
  for (const item of doc.nftables) {
    const [kind, body] = Object.entries(item)[0]!;
    if (kind === 'metainfo') continue;
    const { handle: _h, ...rest } = body;
    const table = kind === 'table' ? body.name : body.table;
    const line = `${kind} ${JSON.stringify(rest).replace(/"counter":\{"packets":\d+,"bytes":\d+\}/g, '"counter":{}')}`;
    (body.family === 'inet' && table === 'meshp' ? out.mesh : out.theirs).push(line);
  }
  return out;
}

/** The mesh table's lines (see splitLines) are its table and the receipt of the last batch, one element, and nothing else. */
export function onlyReceipt(mesh: readonly string[]): boolean {
  return mesh.length === 2 && mesh[0]!.startsWith('table ') && /^set .*"name":"receipt".*"elem":\[\d+\]\}$/.test(mesh[1]!);
}

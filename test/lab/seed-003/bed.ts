/**
 * The lab bed of ADR 0002's checks (docs/adr/0002-adopt-before-converge.md, "How it is checked"): a machine prepared the way the predecessor leaves one.
 *  - m1, the control-node: a found nftables firewall (input: allow 8080, drop the rest), its own
 *    Docker engine, a service container `web` on 8080 under a name the catalogue also uses, the file
 *    /etc/web/web.conf that module declares, a container `old-registry` holding the registry's port,
 *    a container `stray` publishing 18081 that no firewall rule mentions, and a stand-in for the
 *    predecessor's control that rewrites web.conf every second;
 *  - m2, a second machine on the private network 10.77.0.0/24;
 *  - m3, a machine off the private network (10.78.0.0/24).
 * Everything is made by the test and removed in teardown, also when it fails.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import type Docker from 'dockerode';
import { netns, runPrefix, sh, wire, type Netns, type Teardownable } from '../../helpers/netns.js';
import { BUSYBOX_IMAGE, startDockerd, type Dockerd } from '../../helpers/dockerd.js';
import { serving } from '../../helpers/docker-lab.js';
import { MESHP, meshpIn, type Run } from '../../helpers/cli.js';

export const PRIVATE = '10.77.0.0/24';
export const M1 = '10.77.0.1';
export const M2 = '10.77.0.2';
export const M1_OUT = '10.78.0.1';
export const M3 = '10.78.0.2';
export const SERVICE_PORT = 8080;
export const STRAY_PORT = 18081;
export const REGISTRY_DEFAULT = 15000;
export const WEB_CONF = '/etc/web/web.conf';
export const WEB_CONF_BYTES = 'listen 8080\nwritten-by predecessor\n';

export const FOUND_FIREWALL = `#!/usr/sbin/nft -f
table inet filter
flush table inet filter

table inet filter {
\tchain input {
\t\ttype filter hook input priority filter; policy drop;
\t\tct state established,related accept
\t\tiif "lo" accept
\t\tmeta l4proto { icmp, ipv6-icmp } accept
\t\ttcp dport ${SERVICE_PORT} accept
\t}
}
`;

export interface Bed {
  prefix: string;
  dir: string;
  root: string;
  state: string;
  configFile: string;
  m1: Netns;
  m2: Netns;
  m3: Netns;
  engine: Dockerd;
  docker: Docker;
  /** Runs the CLI inside a machine and waits for it. */
  meshp(ns: Netns, args: string[]): Promise<Run>;
  /** Starts a long-running CLI process (controller, agent) inside a machine; stopped by pid in teardown. */
  daemon(ns: Netns, args: string[], name: string): Daemon;
  /** A real TCP connect; false when refused or silent for a second. */
  reachable(from: Netns, host: string, port: number): Promise<boolean>;
  /** The HTTP body served at host:port, or null. */
  get(from: Netns, host: string, port: number): Promise<string | null>;
  nft(args: string[]): Promise<string>;
  /** The found firewall's reload: `nft -f` of its config. */
  reload(): Promise<void>;
  /** A "reboot" of a lab machine: the namespace's ruleset flushed, the found firewall loaded from its config. */
  flushAndReload(): Promise<void>;
  /** Starts the predecessor's stand-in control: rewrites web.conf every second until stopped. */
  standIn(): { stop(): void };
}

export interface Daemon {
  pid: number;
  log(): string;
  stop(signal?: NodeJS.Signals): Promise<void>;
}

export async function bed(t: Teardownable): Promise<Bed> {
  const prefix = runPrefix('lb');
  const m1 = await netns(t, `${prefix}m1`);
  const m2 = await netns(t, `${prefix}m2`);
  const m3 = await netns(t, `${prefix}m3`);
  await wire(m1, `${M1}/24`, m2, `${M2}/24`, `${prefix}p`);
  await wire(m1, `${M1_OUT}/24`, m3, `${M3}/24`, `${prefix}o`);
  await sh('ip', ['-n', m2.name, 'route', 'add', 'default', 'via', M1]);
  await sh('ip', ['-n', m3.name, 'route', 'add', 'default', 'via', M1_OUT]);
  await m1.exec('sysctl', ['-qw', 'net.ipv4.ip_forward=1']);

  const dir = mkdtempSync(join(tmpdir(), `${prefix}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const root = join(dir, 'root');
  const state = join(dir, 'state');
  const configFile = join(root, 'etc/nftables.conf');
  mkdirSync(dirname(configFile), { recursive: true });
  writeFileSync(configFile, FOUND_FIREWALL);
  mkdirSync(join(root, 'etc/web'), { recursive: true });
  writeFileSync(join(root, WEB_CONF), WEB_CONF_BYTES);
  await m1.exec('nft', ['-f', configFile]);

  const engine = await startDockerd(t, { netns: m1, tag: 'lb' });
  const docker = engine.client();
  const run = async (name: string, port: number, text: string, containerPort = 80) => {
    const c = await docker.createContainer({
      name,
      Image: BUSYBOX_IMAGE,
      Cmd: serving(text).map((a) => a.replace('-p 80', `-p ${containerPort}`)),
      ExposedPorts: { [`${containerPort}/tcp`]: {} },
      HostConfig: { PortBindings: { [`${containerPort}/tcp`]: [{ HostPort: String(port) }] } },
    });
    await c.start();
  };
  await run('web', SERVICE_PORT, 'predecessor-web');
  await run('old-registry', REGISTRY_DEFAULT, 'predecessor-registry', 5000);
  await run('stray', STRAY_PORT, 'stray');

  const daemons: ChildProcess[] = [];
  t.teardown(async () => {
    for (const d of daemons) {
      if (d.exitCode === null && d.signalCode === null && d.pid) {
        process.kill(d.pid, 'SIGKILL');
        await new Promise((r) => d.once('exit', r));
      }
    }
  });

  const b: Bed = {
    prefix,
    dir,
    root,
    state,
    configFile,
    m1,
    m2,
    m3,
    engine,
    docker,
    meshp: meshpIn,
    daemon(ns, args, name) {
      const [cmd, argv] = ns.wrap(process.execPath, [MESHP, ...args]);
      const logFile = join(dir, `${name}.log`);
      writeFileSync(logFile, '');
      const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
      const chunks: string[] = [];
      child.stdout?.on('data', (d) => chunks.push(String(d)));
      child.stderr?.on('data', (d) => chunks.push(String(d)));
      daemons.push(child);
      return {
        pid: child.pid!,
        log: () => chunks.join(''),
        stop: async (signal = 'SIGTERM') => {
          if (child.exitCode !== null || child.signalCode !== null) return;
          const exited = new Promise((r) => child.once('exit', r));
          process.kill(child.pid!, signal);
          await exited;
        },
      };
    },
    reachable: (from, host, port) =>
      from.exec('timeout', ['1', 'bash', '-c', `exec 3<>/dev/tcp/${host}/${port}`]).then(
        () => true,
        () => false,
      ),
    async get(from, host, port) {
      try {
        const { stdout } = await from.exec('timeout', ['2', 'busybox', 'wget', '-q', '-O-', `http://${host}:${port}/`]);
        return stdout.trim();
      } catch {
        return null;
      }
    },
    nft: async (args) => (await m1.exec('nft', args)).stdout,
    reload: async () => {
      await m1.exec('nft', ['-f', configFile]);
    },
    flushAndReload: async () => {
      await m1.exec('nft', ['flush', 'ruleset']);
      await m1.exec('nft', ['-f', configFile]);
    },
    standIn() {
      const file = join(root, WEB_CONF);
      const child = spawn(
        'bash',
        ['-c', `i=0; while true; do i=$((i+1)); printf 'listen 8080\\nwritten-by predecessor, pass %s\\n' $i > '${file}'; sleep 1; done`],
        { stdio: 'ignore' },
      );
      daemons.push(child);
      return { stop: () => child.pid && child.exitCode === null && process.kill(child.pid, 'SIGKILL') };
    },
  };
  return b;
}

export function fileBytes(b: Bed, path: string): string {
  return readFileSync(join(b.root, path), 'utf8');
}

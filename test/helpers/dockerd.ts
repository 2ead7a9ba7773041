/**
 * A Docker engine of the test's own, inside a lab namespace (the labs: README, test/lab/): own data
 * root, exec root, pidfile and socket under a short temp folder. Stopped by its pid and its folders
 * removed in teardown, also when the test fails. Start one per test file: it takes seconds.
 */
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, openSync, closeSync, readFileSync, writeFileSync, mkdirSync, symlinkSync, copyFileSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import Docker from 'dockerode';
import { Netns, netns as makeNetns, runPrefix, sh, type Teardownable } from './netns.js';
import { Deadline } from './budget.js';

export const BUSYBOX_IMAGE = 'lab/busybox:1';
/**
 * `meshp genesis --images` for a lab: the busybox stand-ins of the shipped catalogue's images (no
 * registry is reachable here), serving the module's name on each container's port.
 */
export const LAB_IMAGES = fileURLToPath(new URL('../../examples/lab/images.json', import.meta.url));
const APPLETS = ['sh', 'httpd', 'nc', 'sleep', 'cat', 'echo', 'ls', 'mkdir', 'wget', 'true', 'false'];

export interface Dockerd {
  /** The engine's unix socket path. */
  socket: string;
  pid: number;
  netns: Netns;
  /** The temp folder holding data root, exec root, socket and log. */
  dir: string;
  /** A dockerode client on this engine. */
  client(): Docker;
  /** Stops the engine (SIGTERM, SIGKILL after a while); teardown calls it too. Idempotent. */
  stop(): Promise<void>;
  /** The engine's log so far, for failure messages. */
  log(): string;
}

export interface DockerdOptions {
  /** Run in this namespace; when absent a namespace is made (and deleted at teardown). */
  netns?: Netns;
  /** Name prefix tag (e.g. "dk"). */
  tag: string;
  /** Import lab/busybox:1. Default true. */
  busybox?: boolean;
  /** Extra dockerd arguments. */
  args?: string[];
}

/** Running, and not a zombie waiting to be reaped. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

async function waitFor(check: () => Promise<boolean> | boolean, ms: number, step = 50): Promise<boolean> {
  const deadline = new Deadline(ms);
  while (!deadline.expired()) {
    if (await check()) return true;
    await new Promise((r) => setTimeout(r, step));
  }
  return check();
}

/** Mount points under `dir` (its own bind mount included), deepest first. Never outside it. */
function mountsUnder(dir: string): string[] {
  const prefix = dir.endsWith('/') ? dir : `${dir}/`;
  const points = readFileSync('/proc/self/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[1]?.replace(/\\040/g, ' ') ?? '')
    .filter((p) => p.startsWith(prefix))
    .sort((a, b) => b.length - a.length);
  return [...new Set(points)];
}

/** Unmounts everything mounted under `dir`. */
export async function unmountUnder(dir: string): Promise<void> {
  for (const p of mountsUnder(dir)) {
    await sh('umount', ['-R', p]).catch(() => sh('umount', ['-l', p]).catch(() => undefined));
  }
}

function sleepSync(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * When the test process exits without its teardown (an uncaught error): kill the engine's
 * containers, stop it, unmount and remove its folder, and delete the namespace made for it.
 */
function cleanupSync(pid: number, socket: string, dir: string, madeNetns: string | null): void {
  const quiet = { stdio: 'ignore' as const, timeout: 5000 };
  try {
    if (pid && alive(pid)) {
      process.kill(pid, 'SIGCONT');
      const ids = execFileSync('/usr/bin/docker', ['-H', `unix://${socket}`, 'ps', '-aq'], { timeout: 5000, encoding: 'utf8' })
        .split('\n')
        .filter(Boolean);
      if (ids.length > 0) execFileSync('/usr/bin/docker', ['-H', `unix://${socket}`, 'rm', '-f', ...ids], quiet);
    }
  } catch {
    /* not answering */
  }
  if (pid && alive(pid)) {
    process.kill(pid, 'SIGTERM');
    for (let i = 0; i < 100 && alive(pid); i++) sleepSync(100);
    if (alive(pid)) process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 20 && alive(pid); i++) sleepSync(100);
  }
  for (const p of mountsUnder(dir)) {
    try {
      execFileSync('umount', ['-R', p], quiet);
    } catch {
      try {
        execFileSync('umount', ['-l', p], quiet);
      } catch {
        /* leave it */
      }
    }
  }
  rmSync(dir, { recursive: true, force: true });
  if (madeNetns) {
    try {
      execFileSync('ip', ['netns', 'del', madeNetns], quiet);
    } catch {
      /* already gone */
    }
  }
}

/** Imports a busybox image from the machine's static busybox, with applet links. */
export async function importBusybox(docker: Docker, dir: string, image = BUSYBOX_IMAGE): Promise<void> {
  const root = join(dir, 'bb');
  mkdirSync(join(root, 'bin'), { recursive: true });
  copyFileSync('/bin/busybox', join(root, 'bin', 'busybox'));
  for (const a of APPLETS) symlinkSync('busybox', join(root, 'bin', a));
  mkdirSync(join(root, 'tmp'));
  const tar = join(dir, 'bb.tar');
  await sh('tar', ['-C', root, '-cf', tar, '.']);
  const [repo, tag] = image.split(':');
  const progress = await docker.importImage(tar, { repo, tag });
  await new Promise<void>((resolve, reject) => docker.modem.followProgress(progress, (err) => (err ? reject(err) : resolve())));
  rmSync(root, { recursive: true, force: true });
  rmSync(tar, { force: true });
}

export async function startDockerd(t: Teardownable, options: DockerdOptions): Promise<Dockerd> {
  const ns = options.netns ?? (await makeNetns(t, runPrefix(options.tag)));
  // Short: unix socket paths are limited to ~100 characters, and containerd nests deep under exec root.
  const dir = mkdtempSync(`/tmp/${options.tag.slice(0, 3)}`);
  const socket = join(dir, 'd.sock');
  const logPath = join(dir, 'log');
  const pidfile = join(dir, 'd.pid');
  mkdirSync(join(dir, 'data'));
  mkdirSync(join(dir, 'x'));
  const out = openSync(logPath, 'a');
  // detached: the engine gets its own session (setsid), so a signal to the test's group misses it.
  const child = spawn(
    'nsenter',
    [
      `--net=${ns.path}`,
      '--',
      '/usr/sbin/dockerd',
      '--data-root',
      join(dir, 'data'),
      '--exec-root',
      join(dir, 'x'),
      '--pidfile',
      pidfile,
      '-H',
      `unix://${socket}`,
      '--shutdown-timeout',
      '2',
      ...(options.args ?? []),
    ],
    { stdio: ['ignore', out, out], detached: true },
  );
  closeSync(out);
  child.unref();
  // nsenter execs dockerd (no fork for --net), so this is the engine's pid; the pidfile confirms it.
  const launcher = child.pid!;
  let pid = 0;
  let stopped = false;
  const log = () => (existsSync(logPath) ? readFileSync(logPath, 'utf8') : '');
  const lastResort = () => {
    try {
      cleanupSync(pid || launcher, socket, dir, options.netns ? null : ns.name);
    } catch (e) {
      console.error(`# dockerd cleanup in ${dir}: ${String(e)}`);
    }
  };
  process.once('exit', lastResort);

  const stop = async () => {
    if (stopped) return;
    stopped = true;
    // The engine gives each running container its own stop timeout (10 s) on shutdown; kill them first.
    if (pid && alive(pid)) {
      try {
        process.kill(pid, 'SIGCONT'); // a test may have frozen it
        const quick = new Docker({ socketPath: socket, timeout: 3000 });
        const all = await quick.listContainers({ all: true });
        await Promise.all(
          all.map((c) =>
            quick
              .getContainer(c.Id)
              .remove({ force: true })
              .catch(() => undefined),
          ),
        );
      } catch {
        /* not answering: the signals below still stop it */
      }
    }
    for (const p of [pid, launcher]) {
      if (!p || !alive(p)) continue;
      try {
        process.kill(p, 'SIGCONT'); // a test may have frozen it
        process.kill(p, 'SIGTERM');
      } catch {
        /* gone */
      }
      if (!(await waitFor(() => !alive(p), 15_000, 100))) {
        try {
          process.kill(p, 'SIGKILL');
        } catch {
          /* gone */
        }
        await waitFor(() => !alive(p), 5_000, 100);
      }
    }
  };
  t.teardown(async () => {
    try {
      await stop();
      await unmountUnder(dir);
      rmSync(dir, { recursive: true, force: true });
      process.removeListener('exit', lastResort);
    } catch (e) {
      console.error(`# dockerd teardown in ${dir}: ${String(e)}`);
    }
  });

  const docker = () => new Docker({ socketPath: socket });
  const ready = await waitFor(
    async () => {
      if (!pid && existsSync(pidfile)) pid = Number(readFileSync(pidfile, 'utf8').trim()) || 0;
      if (!pid) return false;
      return docker()
        .ping()
        .then(
          () => true,
          () => false,
        );
    },
    30_000,
    100,
  );
  if (!ready) {
    await stop();
    throw new Error(`dockerd in ${ns.name} did not answer on ${socket}; log:\n${log().slice(-2000)}`);
  }
  if (options.busybox !== false) await importBusybox(docker(), dir);
  writeFileSync(join(dir, 'netns'), ns.name);
  return { socket, pid, netns: ns, dir, client: docker, stop, log };
}

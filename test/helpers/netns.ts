/**
 * Lab machines as network namespaces (the labs: README, test/lab/). Every name carries a per-run
 * prefix, and every namespace made here is deleted in teardown, also when the test fails.
 */
import { execFile, execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface Teardownable {
  teardown(fn: () => unknown): void;
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

/** A short per-run prefix: interface names are limited to 15 characters. */
export function runPrefix(tag: string): string {
  return `${tag.slice(0, 3)}${randomBytes(2).toString('hex')}`;
}

export async function sh(cmd: string, args: string[], input?: string): Promise<RunResult> {
  if (input === undefined) {
    const { stdout, stderr } = await run(cmd, args, { maxBuffer: 64 << 20 });
    return { stdout, stderr };
  }
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { maxBuffer: 64 << 20 }, (err, stdout, stderr) =>
      err ? reject(Object.assign(err, { stdout, stderr })) : resolve({ stdout, stderr }),
    );
    child.stdin?.end(input);
  });
}

export class Netns {
  readonly path: string;
  constructor(readonly name: string) {
    this.path = `/var/run/netns/${name}`;
  }

  /** Runs one command inside the namespace's network (nsenter keeps /sys and cgroups as they are). */
  exec(cmd: string, args: string[], input?: string): Promise<RunResult> {
    return sh('nsenter', [`--net=${this.path}`, '--', cmd, ...args], input);
  }

  /** Argument prefix to run a long-lived process inside the namespace. */
  wrap(cmd: string, args: string[]): [string, string[]] {
    return ['nsenter', [`--net=${this.path}`, '--', cmd, ...args]];
  }
}

/** The namespaces this file made and has not deleted yet: what an interrupted file sweeps. */
const made = new Set<string>();

/**
 * A file stopped by a signal (Ctrl-C to the runner, SIGTERM) runs no teardown, and what ran in its
 * namespaces lives on: wireguard-go and dockerd are detached, so the signal to the group misses them.
 * This ends every process in a namespace of this file's own (`ip netns pids`: only what the test
 * started lives there), by pid, and deletes the namespaces, synchronously, before the file goes.
 */
export function sweepNamespaces(): string[] {
  const swept = [...made];
  for (const name of swept) endNamespace(name);
  return swept;
}

/** Ends what still runs in a namespace of this file's own, by pid, then deletes it. */
function endNamespace(name: string): void {
  try {
    for (const pid of execFileSync('ip', ['netns', 'pids', name], { encoding: 'utf8' }).split(/\s+/).filter(Boolean)) {
      try {
        process.kill(Number(pid), 'SIGKILL');
      } catch {
        // gone already
      }
    }
    execFileSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  } catch {
    // deleted already, or being deleted by a teardown
  }
  made.delete(name);
}

let sweepInstalled = false;
function installSweep(): void {
  if (sweepInstalled) return;
  sweepInstalled = true;
  process.once('exit', () => sweepNamespaces());
  // Not on SIGALRM, the runner's timeout: its `tapAbort` message before it runs the teardowns, and a
  // listener of ours would keep tap's own (signal-exit's) from reporting the timeout.
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const)
    process.once(sig, () => {
      sweepNamespaces();
      // Then the signal's own end, as if it had not been caught: raised again for whoever else listens
      // (tap's signal-exit acts only when every listener is its own), or the default.
      setImmediate(() => process.kill(process.pid, sig));
    });
}

/** Creates a namespace with loopback up, deleted at teardown (or swept if the file is stopped first). */
export async function netns(t: Teardownable, name: string): Promise<Netns> {
  installSweep();
  await sh('ip', ['netns', 'add', name]);
  made.add(name);
  // Teardowns run last-registered first: the processes a test started in the namespace after making
  // it were given their own stop already; what is still in it would outlive the namespace's name
  // (a file ended by its timeout gets its teardowns cut short), so it is ended, by pid, first.
  t.teardown(() => endNamespace(name));
  await sh('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
  return new Netns(name);
}

/** Joins two namespaces with a veth pair, each end given an address (CIDR). */
export async function wire(a: Netns, aAddr: string, b: Netns, bAddr: string, name: string): Promise<void> {
  const ea = `${name}a`;
  const eb = `${name}b`;
  await sh('ip', ['link', 'add', ea, 'type', 'veth', 'peer', 'name', eb]);
  await sh('ip', ['link', 'set', ea, 'netns', a.name]);
  await sh('ip', ['link', 'set', eb, 'netns', b.name]);
  await sh('ip', ['-n', a.name, 'addr', 'add', aAddr, 'dev', ea]);
  await sh('ip', ['-n', b.name, 'addr', 'add', bAddr, 'dev', eb]);
  await sh('ip', ['-n', a.name, 'link', 'set', ea, 'up']);
  await sh('ip', ['-n', b.name, 'link', 'set', eb, 'up']);
}

/**
 * An underlay: one bridge in a namespace of its own, and `machine` makes a namespace on it with one
 * address (a /24). No machine routes for another: what they share is this one segment.
 */
export async function underlay(t: Teardownable, prefix: string): Promise<{ under: Netns; machine(name: string, address: string, i: number): Promise<Netns> }> {
  const under = await netns(t, `${prefix}u`);
  await under.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);
  await under.exec('ip', ['link', 'set', 'br0', 'up']);
  const machine = async (name: string, address: string, i: number): Promise<Netns> => {
    const ns = await netns(t, `${prefix}${name}`);
    const [a, b] = [`${prefix}v${i}a`, `${prefix}v${i}b`];
    await sh('ip', ['link', 'add', a, 'type', 'veth', 'peer', 'name', b]);
    await sh('ip', ['link', 'set', a, 'netns', ns.name]);
    await sh('ip', ['link', 'set', b, 'netns', under.name]);
    await ns.exec('ip', ['addr', 'add', `${address}/24`, 'dev', a]);
    await ns.exec('ip', ['link', 'set', a, 'up']);
    await under.exec('ip', ['link', 'set', b, 'master', 'br0', 'up']);
    return ns;
  };
  return { under, machine };
}

/**
 * True when we may build lab machines here (root). A developer without root skips the lab with a
 * reason; CI never skips it: there, not being root is a failure.
 */
export function labAvailable(): boolean {
  const root = process.getuid?.() === 0;
  if (!root && process.env.CI) throw new Error('CI runs the lab (namespaces, nftables, Docker) and needs root');
  return root;
}

/**
 * Every iptables command goes through a runner, so the same driver works on the machine,
 * inside a network namespace (`nsenter --net=… --`), or against a fault injected by a test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { MeshpError } from '@meshp/core';

export interface RunResult {
  stdout: string;
  stderr: string;
  /** Exit status; 127 when the command could not be found. */
  code: number;
}

export interface CommandRunner {
  (cmd: string, args: string[], input?: string): Promise<RunResult>;
  /** Starts a long-lived command (`nft monitor`) where the runner runs commands. Absent: `watch` reads on a timer. */
  spawn?: (cmd: string, args: string[]) => ChildProcess;
}

/** Runs a command directly. A binary that is not installed answers with code 127, like a shell. */
export function localRunner(prefix: string[] = []): CommandRunner {
  const run: CommandRunner = (cmd, args, input) =>
    new Promise((resolve, reject) => {
      const argv = [...prefix, cmd, ...args];
      const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe'] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      child.stdout.on('data', (b: Buffer) => out.push(b));
      child.stderr.on('data', (b: Buffer) => err.push(b));
      child.on('error', (e: NodeJS.ErrnoException) => {
        if (e.code === 'ENOENT') resolve({ stdout: '', stderr: `${argv[0]}: not found`, code: 127 });
        else reject(e);
      });
      child.on('close', (code) => resolve({ stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8'), code: code ?? 1 }));
      child.stdin.on('error', () => undefined);
      child.stdin.end(input ?? '');
    });
  run.spawn = (cmd, args) => {
    const argv = [...prefix, cmd, ...args];
    return spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  };
  return run;
}

/** Runs every command inside a network namespace, e.g. `/var/run/netns/m1`. */
export function nsenterRunner(netnsPath: string): CommandRunner {
  const inner = localRunner(['nsenter', `--net=${netnsPath}`, '--']);
  const run: CommandRunner = async (cmd, args, input) => {
    const r = await inner(cmd, args, input);
    // nsenter reports a missing program as "failed to execute X: No such file or directory", status 127 or 1.
    if (r.code !== 0 && /failed to execute .*No such file or directory/.test(r.stderr)) return { ...r, code: 127 };
    return r;
  };
  run.spawn = inner.spawn;
  return run;
}

/** Runs and insists on success: a missing binary and a failing command each get their own code. */
export async function runChecked(runner: CommandRunner, cmd: string, args: string[], input?: string): Promise<RunResult> {
  let r: RunResult;
  try {
    r = await runner(cmd, args, input);
  } catch (e) {
    throw new MeshpError('MESHP_FIREWALL_FAILED', `${cmd} could not be run`, { cause: e });
  }
  if (r.code === 127) throw new MeshpError('MESHP_FIREWALL_TOOL_MISSING', `${cmd} is not installed`, { details: { cmd } });
  if (r.code !== 0) {
    throw new MeshpError('MESHP_FIREWALL_FAILED', `${cmd} ${args.join(' ')} failed (status ${r.code}): ${r.stderr.trim()}`, {
      details: { cmd, args, code: r.code, stderr: r.stderr },
    });
  }
  return r;
}

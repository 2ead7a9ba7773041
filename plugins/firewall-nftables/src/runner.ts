import { execFile, spawn, type ChildProcess } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

export interface RunOptions {
  input?: string;
}

/**
 * Runs one command to completion. Resolves with its exit status (non-zero too); rejects only
 * when the command could not be started (an `errno` error such as ENOENT).
 */
export type Runner = (argv: readonly string[], options?: RunOptions) => Promise<RunResult>;

/** Starts a long-lived command (`nft monitor`), stdout piped. */
export type Spawner = (argv: readonly string[]) => ChildProcess;

/** The argument prefix that runs a command inside a named network namespace. */
export function netnsPrefix(netns: string): string[] {
  return ['nsenter', `--net=/var/run/netns/${netns}`, '--'];
}

/** Runs commands on this machine, optionally behind a prefix (e.g. {@link netnsPrefix}). */
export function localRunner(prefix: readonly string[] = []): Runner {
  return (argv, options = {}) =>
    new Promise((resolve, reject) => {
      const full = [...prefix, ...argv];
      const child = execFile(full[0]!, full.slice(1), { maxBuffer: 256 << 20, encoding: 'utf8' }, (err, stdout, stderr) => {
        if (err && typeof (err as NodeJS.ErrnoException).code === 'string') {
          reject(err);
          return;
        }
        const code = err ? Number((err as { code?: number }).code ?? 1) : 0;
        resolve({ code, stdout, stderr });
      });
      child.stdin?.on('error', () => undefined);
      if (options.input === undefined) child.stdin?.end();
      else child.stdin?.end(options.input);
    });
}

export function localSpawner(prefix: readonly string[] = []): Spawner {
  return (argv) => {
    const full = [...prefix, ...argv];
    return spawn(full[0]!, full.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  };
}

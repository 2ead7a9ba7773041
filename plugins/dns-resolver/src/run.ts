import { execFile } from 'node:child_process';

export interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs one command to completion with `input` on its stdin; rejects only when it could not be started (ENOENT). */
export type Runner = (argv: readonly string[], input?: string) => Promise<RunResult>;

export const localRunner: Runner = (argv, input) =>
  new Promise((resolve, reject) => {
    const child = execFile(argv[0]!, argv.slice(1), { encoding: 'utf8', timeout: 10_000 }, (err, stdout, stderr) => {
      if (err && typeof (err as NodeJS.ErrnoException).code === 'string') return reject(err);
      resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
    child.stdin?.on('error', () => undefined);
    child.stdin?.end(input ?? '');
  });

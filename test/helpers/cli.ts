/** The built CLI, run as an operator runs it: on this machine, or inside a lab namespace. */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Netns } from './netns.js';

export const MESHP = join(dirname(fileURLToPath(import.meta.url)), '../../bin/dist/main.js');

export interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** One CLI run, killed by its pid if it outlives `timeoutMs`. */
export function meshpIn(ns: Netns | null, args: string[], timeoutMs = 120_000): Promise<Run> {
  const [cmd, argv] = ns ? ns.wrap(process.execPath, [MESHP, ...args]) : [process.execPath, [MESHP, ...args]];
  return new Promise((resolve) => {
    const child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    const timer = setTimeout(() => child.pid !== undefined && process.kill(child.pid, 'SIGKILL'), timeoutMs);
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

/**
 * SIGSTOP, waited for: the signal is delivered asynchronously, and on a loaded machine a thread of
 * the process can still answer a request after kill() returned. Resolves once every thread of the
 * process is stopped (state T in /proc/PID/task/TID/stat).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { until } from './budget.js';

function allStopped(pid: number): boolean {
  try {
    return readdirSync(`/proc/${pid}/task`).every((tid) => {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      return stat.slice(stat.lastIndexOf(')') + 2).startsWith('T');
    });
  } catch {
    return true; // gone: nothing of it answers
  }
}

export async function sigstop(pid: number): Promise<void> {
  process.kill(pid, 'SIGSTOP');
  await until(`process ${pid} stopped`, () => allStopped(pid), 20, 5);
}

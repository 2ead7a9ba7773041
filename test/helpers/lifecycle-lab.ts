/**
 * The controller, the agent and the CLI as real processes INSIDE one lab namespace (the server
 * machine of nft-lab.ts): the controller listens on that namespace's loopback, so every byte of the
 * control traffic stays inside it. Processes are killed by their pid in teardown.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Netns, Teardownable } from './netns.js';
import { MESHP, type LogLine } from './grpc-procs.js';

export class NsProc {
  readonly child: ChildProcess;
  readonly lines: LogLine[] = [];
  stderr = '';

  constructor(t: Teardownable, ns: Netns, args: string[]) {
    const [cmd, argv] = ns.wrap(process.execPath, [MESHP, ...args]);
    this.child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    let buf = '';
    this.child.stdout!.on('data', (d: Buffer) => {
      buf += d.toString('utf8');
      let i;
      while ((i = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        try {
          this.lines.push(JSON.parse(line) as LogLine);
        } catch {
          this.lines.push({ msg: line });
        }
      }
    });
    this.child.stderr!.on('data', (d: Buffer) => (this.stderr += d.toString('utf8')));
    const pid = this.child.pid;
    t.teardown(() => {
      if (pid !== undefined && this.child.exitCode === null && this.child.signalCode === null) process.kill(pid, 'SIGKILL');
    });
  }

  async waitFor(pred: (l: LogLine) => boolean, timeoutMs = 20_000): Promise<LogLine> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const hit = this.lines.find(pred);
      if (hit) return hit;
      if (this.child.exitCode !== null) throw new Error(`process exited (${this.child.exitCode}); stderr: ${this.stderr}`);
      if (Date.now() > deadline) throw new Error(`timed out; last lines: ${JSON.stringify(this.lines.slice(-5))}; stderr: ${this.stderr}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
}

export interface Run {
  code: number | null;
  out: string;
  err: string;
}

/** One CLI run inside the namespace. */
export function meshpIn(ns: Netns, args: string[], timeoutMs = 60_000): Promise<Run> {
  const [cmd, argv] = ns.wrap(process.execPath, [MESHP, ...args]);
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

export interface NsCluster {
  controller: NsProc;
  address: string;
  /** Admin CLI arguments reaching the controller. */
  admin: string[];
  agent(name: string, token: string, root: string, extra?: string[]): NsProc;
}

/** A controller on the namespace's loopback; agents started in the same namespace. */
export async function nsCluster(t: Teardownable, ns: Netns, dir: string): Promise<NsCluster> {
  const state = join(dir, 'ctl');
  const controller = new NsProc(t, ns, ['controller', 'serve', '--state', state, '--listen', '127.0.0.1:0']);
  const line = await controller.waitFor((l) => l.msg === 'controller serving');
  const address = String(line.address);
  const admin = ['--state', state, '--controller', address];
  return {
    controller, address, admin,
    agent: (name, token, root, extra = []) => {
      const base = join(dir, name);
      mkdirSync(base, { recursive: true });
      return new NsProc(t, ns, [
        'agent', '--state', join(base, 'state'), '--controller', address, '--name', name, '--root', root,
        '--docker-socket', join(base, 'absent-docker.sock'), '--interval', '1', '--token', token, ...extra,
      ]);
    },
  };
}

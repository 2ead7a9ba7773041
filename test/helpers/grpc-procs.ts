/**
 * Controllers and agents as real processes on 127.0.0.1, for the transport tests. Every process is
 * killed by its pid in t.teardown; every folder is removed there too.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Netns } from './netns.js';
import { Deadline } from './budget.js';

export const MESHP = join(dirname(fileURLToPath(import.meta.url)), '../../bin/dist/main.js');

interface Teardown {
  teardown(fn: () => unknown): void;
}

export type LogLine = Record<string, unknown> & { msg?: string };

export class Proc {
  readonly child: ChildProcess;
  readonly lines: LogLine[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;
  #waiters: (() => void)[] = [];

  /** Runs on this machine, or inside the lab namespace `ns`. */
  /** `script`: another meshp's main.js (an earlier commit's agent, test/compat). */
  constructor(t: Teardown, args: string[], ns?: Netns, script = MESHP) {
    const [cmd, argv] = ns ? ns.wrap(process.execPath, [script, ...args]) : [process.execPath, [script, ...args]];
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
        for (const w of this.#waiters.splice(0)) w();
      }
    });
    this.child.stderr!.on('data', (d: Buffer) => {
      this.stderr += d.toString('utf8');
      for (const w of this.#waiters.splice(0)) w();
    });
    this.exited = new Promise((resolve) => this.child.once('exit', (code) => {
      for (const w of this.#waiters.splice(0)) w();
      resolve(code);
    }));
    t.teardown(() => this.kill('SIGKILL'));
    // A test file that throws at its top level exits without its teardowns: its processes go with it all the same.
    process.once('exit', () => this.kill('SIGKILL'));
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  kill(signal: NodeJS.Signals): void {
    if (this.alive) process.kill(this.pid, signal);
  }

  /** Waits for a log line that matches, from index `from` on. */
  async waitFor(pred: (l: LogLine) => boolean, timeoutMs = 15_000, from = 0): Promise<LogLine> {
    const deadline = new Deadline(timeoutMs);
    for (;;) {
      const hit = this.lines.slice(from).find(pred);
      if (hit) return hit;
      if (!this.alive) throw new Error(`process ${this.pid} exited before the line came; stderr: ${this.stderr}`);
      const left = deadline.left();
      if (left <= 0) throw new Error(`timed out waiting for a log line; last lines: ${JSON.stringify(this.lines.slice(-5))}; stderr: ${this.stderr}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 500));
        this.#waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  applied(from = 0): LogLine[] {
    return this.lines.slice(from).filter((l) => l.msg === 'applied');
  }
}

export function workdir(t: Teardown, tag: string): string {
  const dir = mkdtempSync(join(tmpdir(), `meshp-grpc-${tag}-`));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export function meshp(...args: string[]): { code: number | null; out: string; err: string } {
  const r = spawnSync(process.execPath, [MESHP, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 30_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

export function meshpJson<T>(...args: string[]): T {
  const r = meshp(...args, '--json');
  if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
  return JSON.parse(r.out) as T;
}

export interface ControllerProc {
  proc: Proc;
  state: string;
  address: string;
  metrics: string;
}

/** Starts a controller; port 0 (a free one) unless `address` names the one to take again. */
export async function startController(t: Teardown, state: string, extra: string[] = [], address = '127.0.0.1:0'): Promise<ControllerProc> {
  const proc = new Proc(t, ['controller', 'serve', '--state', state, '--listen', address, '--metrics-listen', '127.0.0.1:0', ...extra]);
  // A busy machine (several test files at once) can take many seconds to start node: wait long, fail only on a hang.
  const line = await proc.waitFor((l) => l.msg === 'controller serving', 60_000);
  return { proc, state, address: String(line.address), metrics: String(line.metrics) };
}

export interface AgentProc {
  proc: Proc;
  name: string;
  state: string;
  root: string;
}

/** An agent that touches nothing of this machine: files under its own root, no firewall plugin, no engine. */
export function startAgent(t: Teardown, dir: string, name: string, controller: string, token?: string): AgentProc {
  const base = join(dir, name);
  const root = join(base, 'root');
  const state = join(base, 'state');
  mkdirSync(root, { recursive: true });
  const args = ['agent', '--state', state, '--controller', controller, '--name', name, '--root', root, '--firewall', 'none', '--docker-socket', join(base, 'absent-docker.sock'), '--interval', '1'];
  if (token) args.push('--token', token);
  return { proc: new Proc(t, args), name, state, root };
}

export function createToken(ctl: ControllerProc, ...extra: string[]): string {
  return meshpJson<{ token: string }>('token', 'create', '--state', ctl.state, '--controller', ctl.address, ...extra).token;
}

export function writeJson(dir: string, name: string, doc: unknown): string {
  const f = join(dir, name);
  writeFileSync(f, JSON.stringify(doc));
  return f;
}

export interface NodeRow {
  name: string;
  mode: string;
  appliedVersion: number;
  stateVersion: number;
  gap: number;
  firewall: string;
  held: number;
  changed: number;
}

export function nodeList(ctl: ControllerProc): NodeRow[] {
  return meshpJson<{ nodes: NodeRow[] }>('node', 'list', '--state', ctl.state, '--controller', ctl.address).nodes;
}

export async function waitUntil<T>(what: string, fn: () => T | undefined | false, timeoutMs = 20_000): Promise<T> {
  const deadline = new Deadline(timeoutMs);
  let step = 200;
  let last: unknown;
  for (;;) {
    try {
      const v = fn();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (deadline.expired()) throw new Error(`timed out: ${what}${last ? ` (${String(last)})` : ''}`);
    // Each look may run the CLI: look less often as the wait grows, so the wait does not load the machine.
    await new Promise((r) => setTimeout(r, step));
    step = Math.min(1000, Math.round(step * 1.5));
  }
}

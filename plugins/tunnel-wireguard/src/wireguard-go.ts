/**
 * wireguard-go, where the kernel has no WireGuard: `wireguard-go -f IFNAME`, a child the plugin
 * starts and stops by pid (kept in the state folder). It runs in its own process group and outlives
 * the agent: an agent restart finds it by its pid and configures it again, no tunnel goes down.
 *
 * Never WG_PROCESS_FOREGROUND=0: the Debian build then re-launches itself in a loop (seen in the lab).
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MeshpError } from '@meshp/core';
import { socketPath, uapiGet } from './uapi.js';

export interface WireguardGoOptions {
  ifname: string;
  stateDir: string;
  binary?: string;
  socketDir?: string;
  /** How long the socket may take to answer after a start. Default 10 s. */
  startTimeoutMs?: number;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class WireguardGo {
  readonly pidFile: string;
  readonly logFile: string;
  readonly socket: string;
  #pid: number | null = null;

  constructor(readonly o: WireguardGoOptions) {
    this.pidFile = join(o.stateDir, `${o.ifname}.pid`);
    this.logFile = join(o.stateDir, `${o.ifname}.wireguard-go.log`);
    this.socket = socketPath(o.ifname, o.socketDir);
  }

  get pid(): number | null {
    return this.#pid;
  }

  /** The pid of the wireguard-go that serves this interface, from the pid file, when it still runs. */
  running(): number | null {
    let pid: number;
    try {
      pid = Number(readFileSync(this.pidFile, 'utf8').trim());
    } catch {
      return null;
    }
    if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return null;
    try {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
      if (!argv.some((a) => a.endsWith('wireguard-go')) || !argv.includes(this.o.ifname)) return null;
    } catch {
      return null;
    }
    return pid;
  }

  /** Adopts the running one, or starts one and waits for its socket. Answers whether it was adopted. */
  async ensure(): Promise<{ pid: number; adopted: boolean }> {
    const found = this.running();
    if (found !== null) {
      try {
        await uapiGet(this.socket);
        this.#pid = found;
        return { pid: found, adopted: true };
      } catch {
        await this.#kill(found);
      }
    }
    if (existsSync(this.socket)) rmSync(this.socket, { force: true });
    mkdirSync(this.o.stateDir, { recursive: true, mode: 0o700 });
    const env: NodeJS.ProcessEnv = { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'error' };
    delete env.WG_PROCESS_FOREGROUND;
    const log = openSync(this.logFile, 'a', 0o600);
    let exited: string | null = null;
    try {
      const child = spawn(this.o.binary ?? 'wireguard-go', ['-f', this.o.ifname], { detached: true, stdio: ['ignore', log, log], env });
      const spawnError = new Promise<Error>((resolve) => child.once('error', resolve));
      child.once('exit', (code, signal) => {
        exited = `exited (${signal ?? code})`;
      });
      child.unref();
      const first = await Promise.race([spawnError, sleep(0).then(() => null)]);
      if (first || child.pid === undefined) {
        throw new MeshpError('MESHP_TUNNEL_UNAVAILABLE', `wireguard-go could not be started: ${first?.message ?? 'no pid'}`);
      }
      this.#pid = child.pid;
      writeFileSync(this.pidFile, `${child.pid}\n`, { mode: 0o600 });
    } finally {
      closeSync(log);
    }
    const deadline = Date.now() + (this.o.startTimeoutMs ?? 10_000);
    for (;;) {
      if (exited) throw new MeshpError('MESHP_TUNNEL_UNAVAILABLE', `wireguard-go for ${this.o.ifname} ${exited}: ${this.#logTail()}`);
      try {
        await uapiGet(this.socket);
        return { pid: this.#pid, adopted: false };
      } catch (e) {
        if (Date.now() > deadline)
          throw new MeshpError('MESHP_TUNNEL_FAILED', `wireguard-go for ${this.o.ifname} did not answer on ${this.socket}: ${this.#logTail()}`, { cause: e });
      }
      await sleep(50);
    }
  }

  /** Stops it by its pid (TERM, then KILL), and removes its socket and pid file. */
  async stop(): Promise<void> {
    const pid = this.#pid ?? this.running();
    if (pid !== null) await this.#kill(pid);
    this.#pid = null;
    rmSync(this.socket, { force: true });
    rmSync(this.pidFile, { force: true });
  }

  async #kill(pid: number): Promise<void> {
    try {
      process.kill(pid, 'SIGTERM');
    } catch {
      return;
    }
    for (let i = 0; i < 100 && alive(pid); i++) await sleep(50);
    if (alive(pid)) process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 40 && alive(pid); i++) await sleep(50);
  }

  #logTail(): string {
    try {
      return readFileSync(this.logFile, 'utf8').trim().split('\n').slice(-3).join(' / ') || 'nothing logged';
    } catch {
      return 'no log';
    }
  }
}

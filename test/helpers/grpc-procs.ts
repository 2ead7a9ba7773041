/**
 * Controllers and agents as real processes on 127.0.0.1, for the transport tests. Every process is
 * killed by its pid in t.teardown; every folder is removed there too.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ADMIN_CREDENTIAL_FILE, readAdminCredential } from '@meshp/controller';
import { AdminClient } from '@meshp/transport-grpc';
import type { ModuleDecl } from '@meshp/core';
import { declarationToWire } from '@meshp/core/delta';
import type { Netns } from './netns.js';
import type { Subtest } from './tap-types.js';
import { Deadline, loadFactor, until } from './budget.js';
import { widerThanPrivate } from './modes.js';

export const MESHP = join(dirname(fileURLToPath(import.meta.url)), '../../bin/dist/main.js');

interface Teardown {
  teardown(fn: () => unknown): void;
}

export type LogLine = Record<string, unknown> & { msg?: string };

/** The processes the tests of this file started that still run: one exit listener kills them all (not one listener each). */
const LIVE = new Set<Proc>();
let exitHooked = false;

export class Proc {
  readonly child: ChildProcess;
  readonly lines: LogLine[] = [];
  stderr = '';
  readonly exited: Promise<number | null>;
  #waiters: (() => void)[] = [];

  /** Runs on this machine, or inside the lab namespace `ns`. */
  /** `script`: another meshp's main.js (an earlier commit's agent, test/compat); `exe`: what runs it (node, or the Python client's interpreter). */
  /** `env`: added to this process's environment (MESHP_LOG_LEVEL, say). */
  constructor(t: Teardown, args: string[], ns?: Netns, script = MESHP, exe = process.execPath, env: NodeJS.ProcessEnv = {}) {
    const [cmd, argv] = ns ? ns.wrap(exe, [script, ...args]) : [exe, [script, ...args]];
    this.child = spawn(cmd, argv, { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
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
    this.exited = new Promise((resolve) =>
      this.child.once('exit', (code) => {
        for (const w of this.#waiters.splice(0)) w();
        resolve(code);
      }),
    );
    // host.db holds the credential and held files' originals, controller.db catalogue contents (issue 13):
    // the state folder of every controller and agent of today's meshp a test runs is checked private once
    // the process is gone (teardowns run last-registered first: after the kill, before the folder goes).
    const state =
      script === MESHP && (args[0] === 'agent' || (args[0] === 'controller' && args[1] === 'serve')) ? args[args.indexOf('--state') + 1] : undefined;
    if (state) {
      t.teardown(() => {
        const wide = widerThanPrivate(state);
        if (wide) throw new Error(`meshp ${args[0]}'s state not private: ${wide}`);
      });
    }
    t.teardown(() => this.kill('SIGKILL'));
    // A test file that throws at its top level exits without its teardowns: its processes go with it all the same.
    LIVE.add(this);
    this.child.once('exit', () => LIVE.delete(this));
    if (!exitHooked) {
      exitHooked = true;
      process.once('exit', () => {
        for (const p of LIVE) p.kill('SIGKILL');
      });
    }
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

  /** Waits for a log line that matches, from index `from` on (the budget in idle-machine time, stretched by the load: budget.ts). */
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
  const r = spawnSync(process.execPath, [MESHP, ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 120_000 });
  return { code: r.status, out: r.stdout, err: r.stderr };
}

export function meshpJson<T>(...args: string[]): T {
  return parseJson<T>(args, meshp(...args, '--json'));
}

function parseJson<T>(args: string[], r: { code: number | null; out: string; err: string }): T {
  if (r.code !== 0) throw new Error(`meshp ${args.join(' ')} → ${r.code}: ${r.err}`);
  return JSON.parse(r.out) as T;
}

/**
 * `meshp` without blocking this process. A test that holds streams in this process (RawAgent, a
 * control link) must use it: spawnSync stops the event loop, and a CLI run that takes longer than
 * the keepalive timeout on a busy machine gets those streams closed by the controller.
 */
export function meshpAsync(...args: string[]): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const c = spawn(process.execPath, [MESHP, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    c.stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
    c.stderr.on('data', (d: Buffer) => (err += d.toString('utf8')));
    const timer = setTimeout(() => c.kill('SIGKILL'), 120_000 * loadFactor());
    c.once('error', reject);
    c.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out, err });
    });
  });
}

/**
 * The CLI against one controller, for tests that script it: `ok` asserts a command succeeded,
 * `policy` sets the rules (each from → to) with a fresh file each time.
 */
export function adminCli(t: Subtest, ctl: ControllerProc, dir: string) {
  const ok = (...args: string[]) => {
    const r = meshp(...args, '--state', ctl.state, '--controller', ctl.address);
    t.equal(r.code, 0, `meshp ${args.join(' ')}: ${r.err}`);
  };
  let n = 0;
  const policy = (rules: [string, string][]) =>
    ok('policy', 'set', writeJson(dir, `p${++n}.json`, { rules: rules.map(([from, to]) => ({ from, to })) }), '--yes');
  return { ok, policy };
}

export async function meshpJsonAsync<T>(...args: string[]): Promise<T> {
  return parseJson<T>(args, await meshpAsync(...args, '--json'));
}

export interface ControllerProc {
  proc: Proc;
  state: string;
  address: string;
  metrics: string;
  /** An Admin client in this process (one connection, closed in teardown): polling without a CLI process per look. */
  admin?: () => Promise<AdminClient>;
}

/** Starts a controller; port 0 (a free one) unless `address` names the one to take again. */
/**
 * `logLevel`: the controller's MESHP_LOG_LEVEL; 'debug' where a test reads each agent's 'delta sent'
 * line (at info the controller says one 'fan-out sent' line per fan-out, issue 31).
 */
export async function startController(
  t: Teardown,
  state: string,
  extra: string[] = [],
  address = '127.0.0.1:0',
  logLevel?: 'debug' | 'info',
): Promise<ControllerProc> {
  const args = ['controller', 'serve', '--state', state, '--listen', address, '--metrics-listen', '127.0.0.1:0', ...extra];
  const proc = new Proc(t, args, undefined, MESHP, process.execPath, logLevel ? { MESHP_LOG_LEVEL: logLevel } : {});
  // A busy machine (several test files at once) can take many seconds to start node: wait long, fail only on a hang.
  const line = await proc.waitFor((l) => l.msg === 'controller serving', 60_000);
  // controller.db holds catalogue contents and credentials' digests (issue 13): every controller a test runs is checked.
  const wide = widerThanPrivate(state);
  if (wide) throw new Error(`controller state not private: ${wide}`);
  let admin: Promise<AdminClient> | undefined;
  t.teardown(() =>
    admin?.then(
      (c) => c.close(),
      () => undefined,
    ),
  );
  const connect = () => {
    const cred = readAdminCredential(join(state, ADMIN_CREDENTIAL_FILE));
    return AdminClient.connect({ address: String(line.address), fingerprint: cred.fingerprint, credential: cred.secret });
  };
  return { proc, state, address: String(line.address), metrics: String(line.metrics), admin: () => (admin ??= connect()) };
}

/** A second replica's state folder: the same certificate (agents pin it), version key and admin credential as the first's. */
export function replicaState(from: string, to: string): void {
  mkdirSync(join(to, 'tls'), { recursive: true, mode: 0o700 });
  chmodSync(to, 0o700);
  for (const f of ['tls/controller.crt', 'tls/controller.key', 'controller.version.key', ADMIN_CREDENTIAL_FILE]) {
    copyFileSync(join(from, f), join(to, f));
    chmodSync(join(to, f), 0o600);
  }
}

export interface AgentProc {
  proc: Proc;
  name: string;
  state: string;
  root: string;
}

/**
 * An agent that touches nothing of this machine: files under its own root, no firewall plugin, no
 * engine. `controller`: one address, or each replica's (`--controller` repeated; none: what its
 * state folder kept).
 */
export function startAgent(t: Teardown, dir: string, name: string, controller: string | string[], token?: string, extra: string[] = []): AgentProc {
  const base = join(dir, name);
  const root = join(base, 'root');
  const state = join(base, 'state');
  mkdirSync(root, { recursive: true });
  const controllers = (Array.isArray(controller) ? controller : [controller]).flatMap((c) => ['--controller', c]);
  const args = [
    'agent',
    '--state',
    state,
    ...controllers,
    '--name',
    name,
    '--root',
    root,
    '--firewall',
    'none',
    '--docker-socket',
    join(base, 'absent-docker.sock'),
    '--interval',
    '1',
  ];
  if (token) args.push('--token', token);
  args.push(...extra);
  return { proc: new Proc(t, args), name, state, root };
}

/** A token made in this process over the Admin service (what `meshp token create --tag … [--adopted] [--ttl]` makes), without a CLI process. */
export async function tokenFor(ctl: ControllerProc, tags: string[] = [], adopted = false, ttlSeconds = 3600): Promise<string> {
  if (!ctl.admin) return createToken(ctl, ...tags.flatMap((x) => ['--tag', x]), ...(adopted ? ['--adopted'] : []), '--ttl', `${ttlSeconds}s`);
  return (await (await ctl.admin()).call('createToken', { network: 'default', mode: adopted ? 1 : 2, ttlSeconds, tags })).token;
}

/**
 * What the CLI's admin commands send, over the controller's Admin client in this process: for tests
 * where a controller's or an agent's behaviour is under test, not the CLI (a CLI process costs
 * seconds on a busy machine; the CLI itself is tested in input-contract, lifecycle-remote, the labs).
 * `ctl` is read at each call, so a test that restarts its controller keeps using the one helper.
 */
export function adminCalls(ctl: () => ControllerProc, network = 'default') {
  const c = async () => {
    const x = ctl();
    if (!x.admin) throw new Error('this controller has no in-process Admin client');
    return x.admin();
  };
  const module = (method: 'assignModule' | 'unassignModule' | 'takeModule') => async (node: string, name: string) =>
    (await c()).call(method, { network, node, module: name });
  return {
    /** `meshp catalogue add` of these modules. */
    catalogue: async (modules: Omit<ModuleDecl, 'taken'>[]) => {
      const wire = declarationToWire({
        apiVersion: 'meshp/v1',
        node: 'catalogue',
        mode: 'converged',
        settings: { ports: {} },
        modules: modules.map((m) => ({ ...m, taken: false })),
      }).modules;
      return (await c()).call('addCatalogue', { network, modules: wire });
    },
    assign: module('assignModule'),
    unassign: module('unassignModule'),
    take: module('takeModule'),
    /** `meshp policy set` with these rules (each from → to, optionally ports). */
    policy: async (rules: { from: string; to: string; ports?: string[] }[]) =>
      (await c()).call('setPolicy', { network, rules: rules.map((r) => ({ fromTag: r.from, toTag: r.to, ports: r.ports ?? [] })) }),
    remove: async (node: string) => (await c()).call('removeNode', { network, node }),
    rename: async (node: string, newName: string) => (await c()).call('renameNode', { network, node, newName }),
  };
}

export function createToken(ctl: ControllerProc, ...extra: string[]): string {
  return meshpJson<{ token: string }>('token', 'create', '--state', ctl.state, '--controller', ctl.address, ...extra).token;
}

export async function createTokenAsync(ctl: ControllerProc, ...extra: string[]): Promise<string> {
  return (await meshpJsonAsync<{ token: string }>('token', 'create', '--state', ctl.state, '--controller', ctl.address, ...extra)).token;
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

/**
 * The rows `meshp node list` shows, read in this process over the Admin service (name, versions, gap):
 * for waits that poll; a CLI process per look costs seconds on a busy machine. Assertions about what
 * the CLI answers use nodeList.
 */
export async function nodes(ctl: ControllerProc, network = 'default'): Promise<NodeRow[]> {
  if (!ctl.admin) return nodeList(ctl);
  const r = await (await ctl.admin()).call('listNodes', { network });
  const MODES = ['unspecified', 'adopted', 'converged'];
  return r.nodes.map((n) => ({
    name: n.name,
    mode: MODES[Number(n.mode)] ?? String(n.mode),
    appliedVersion: Number(n.appliedVersion),
    stateVersion: Number(n.stateVersion),
    gap: Number(n.gap),
    firewall: n.firewallKind,
    held: n.held,
    changed: n.changed,
  }));
}

export function nodeList(ctl: ControllerProc): NodeRow[] {
  return meshpJson<{ nodes: NodeRow[] }>('node', 'list', '--state', ctl.state, '--controller', ctl.address).nodes;
}

export async function nodeListAsync(ctl: ControllerProc): Promise<NodeRow[]> {
  return (await meshpJsonAsync<{ nodes: NodeRow[] }>('node', 'list', '--state', ctl.state, '--controller', ctl.address)).nodes;
}

/** Polls `fn` (sync or async) until it answers something truthy. */
export async function waitUntil<T>(what: string, fn: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  // A look that throws (a CLI process that failed, a controller still starting) counts as not yet; the last error is told on timeout.
  let last: unknown;
  const look = async () => {
    try {
      return await fn();
    } catch (e) {
      last = e;
      return undefined;
    }
  };
  try {
    return await until(what, look, timeoutMs / 1000);
  } catch (e) {
    throw new Error(`${(e as Error).message}${last ? ` (last error: ${String(last)})` : ''}`);
  }
}

/**
 * The mesh lab's bed: machines joined only by an underlay bridge (no shared private link).
 *  - c: the control-node, 10.97.0.10 — its own Docker engine, `meshp genesis` without
 *    `--private-interface` (so the private network is the tunnel), the controller, its agent;
 *  - a1..a3 (or as many as asked): agents, 10.97.0.1-3, each serving TCP on PORT and OTHER_PORT;
 *  - o: a machine on the underlay that never enrols (10.97.0.20): "outside".
 * Teardown, registered before anything starts: agents and servers by pid (Proc), each wireguard-go
 * by the pid its agent kept, its socket; the engine by its own teardown; the namespaces.
 */
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { MESHP, Proc, writeJson } from '../../helpers/grpc-procs.js';
import { runPrefix, sh, underlay, type Netns } from '../../helpers/netns.js';
import { LAB_IMAGES, startDockerd, type Dockerd } from '../../helpers/dockerd.js';
import { Deadline, until } from '../../helpers/budget.js';
import { publicKeyOf } from '@meshp/tunnel-wireguard';
import { alive } from './bed.js';

export const CONTROL_IP = '10.97.0.10';
export const CONTROL = `${CONTROL_IP}:7443`;
export const OUTSIDE_IP = '10.97.0.20';
export const PORT = 7000;
export const OTHER_PORT = 7001;
export const STORE = 15432;

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface Node {
  name: string;
  ns: Netns;
  ifname: string;
  state: string;
  proc: Proc | null;
  /** The agent's arguments without its token (a restart needs none). */
  args: string[];
}

/** What one node's interface holds: peer key → last handshake (s since the epoch, 0 = none). */
export async function wgPeers(n: Node): Promise<Map<string, number>> {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'latest-handshakes']);
  return new Map(
    stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t'))
      .map(([k, h]) => [k!, Number(h)]),
  );
}

export async function wgEndpoints(n: Node): Promise<Map<string, string>> {
  const { stdout } = await n.ns.exec('wg', ['show', n.ifname, 'endpoints']);
  return new Map(
    stdout
      .split('\n')
      .filter(Boolean)
      .map((l) => l.split('\t') as [string, string]),
  );
}

export function readIf(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

export const keyOf = (n: Node): string => publicKeyOf(readIf(join(n.state, 'wireguard', `${n.ifname}.key`)) ?? '');
export const wgPid = (n: Node): number => Number(readIf(join(n.state, 'wireguard', `${n.ifname}.pid`)));

export async function meshAddress(n: Node): Promise<string> {
  const { stdout } = await n.ns.exec('ip', ['-j', 'addr', 'show', 'dev', n.ifname]);
  const info = JSON.parse(stdout) as { addr_info: { family: string; local: string }[] }[];
  return info[0]?.addr_info.find((x) => x.family === 'inet')?.local ?? '';
}

/** A TCP connect from `from` (answered within a second, or not). */
export const reaches = (from: Netns, host: string, port: number): Promise<boolean> =>
  from.exec('timeout', ['1', 'bash', '-c', `exec 3<>/dev/tcp/${host}/${port}`]).then(
    () => true,
    () => false,
  );

/** Allowed: retried while the budget lasts (the first packet may wait for a handshake). */
export const reachesSoon = (from: Netns, host: string, port: number, idleSeconds = 15): Promise<boolean> =>
  until(`${from.name} → ${host}:${port}`, () => reaches(from, host, port), idleSeconds, 100).catch(() => false);

export interface MeshBed {
  prefix: string;
  dir: string;
  under: Netns;
  c: Node;
  agents: Node[];
  outside: Netns;
  engine: Dockerd;
  ctlState: string;
  ctl: Proc;
  genesis: { plan: { privateNetwork: { kind: string; interface: string } } };
  cli(...args: string[]): Promise<string>;
  policy(rules: { from: string; to: string; ports?: string[] }[]): Promise<string>;
  startController(): Promise<void>;
  startAgent(n: Node, extra?: string[]): Proc;
}

/** Machines made by another bed (the NAT lab's: test/lab/nat/bed.ts natNet) instead of this underlay's. */
export interface MeshMachines {
  under: Netns;
  /** The control-node's machine and the address its agents dial (the controller on :7443, its tunnel on :51820). */
  c: Netns;
  controlIp: string;
  outside: Netns;
  /** Each agent's machine, its name, and the tunnel endpoint it is told (null: none, it is found where the controller saw it). */
  agents: { name: string; ns: Netns; endpoint: string | null }[];
  /** More of `controller serve`'s options. */
  controllerArgs?: string[];
}

/**
 * `count`: the agents a1..aN (3 unless asked; routes.test.ts asks 4: two routers). `tag`: the first
 * letters of the namespaces, interfaces and engine (a lab of its own beside another file's).
 * `machines`: the machines made by the caller with this prefix (`count` is then theirs).
 */
export async function meshBed(t: Teardown, dir: string, count = 3, tag = 'wgm', machines?: (prefix: string) => Promise<MeshMachines>): Promise<MeshBed> {
  const prefix = runPrefix(tag);
  const nodes: Node[] = [];
  t.teardown(async () => {
    for (const n of nodes) n.proc?.kill('SIGKILL');
    for (const n of nodes) {
      const pid = wgPid(n);
      if (pid && alive(pid)) {
        process.kill(pid, 'SIGTERM');
        const d = new Deadline(5_000);
        while (alive(pid) && !d.expired()) await new Promise((r) => setTimeout(r, 50));
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
      rmSync(`/var/run/wireguard/${n.ifname}.sock`, { force: true });
    }
  });
  // A file ended by its timeout runs no teardown: each wireguard-go goes with it all the same.
  process.once('exit', () => {
    for (const n of nodes) {
      const pid = wgPid(n);
      if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
      rmSync(`/var/run/wireguard/${n.ifname}.sock`, { force: true });
    }
  });
  const engineOf = (ns: Netns) => startDockerd(t, { netns: ns, tag: tag === 'wgm' ? 'wgd' : `${tag.slice(0, 2)}d` });
  let m: MeshMachines;
  let starting: Promise<Dockerd>;
  if (machines) {
    m = await machines(prefix);
    starting = engineOf(m.c);
  } else {
    const { under, machine } = await underlay(t, prefix);
    const cNs = await machine('c', CONTROL_IP, 0);
    // The engine starts while the other machines are made.
    starting = engineOf(cNs);
    const [outside, ...agentNs] = await Promise.all([
      machine('o', OUTSIDE_IP, 9),
      ...Array.from({ length: count }, (_, k) => k + 1).map((i) => machine(`a${i}`, `10.97.0.${i}`, i)),
    ]);
    // a3 is told no endpoint: its peers find it where the controller saw it.
    const agents = agentNs.map((ns, k) => ({ name: `a${k + 1}`, ns, endpoint: k === 2 ? null : `10.97.0.${k + 1}:51820` }));
    m = { under, c: cNs, controlIp: CONTROL_IP, outside, agents };
  }
  const { under, c: cNs, outside } = m;
  const engine = await starting;
  const ctlState = join(dir, 'ctl');
  const root = join(dir, 'c-root');
  mkdirSync(root, { recursive: true });
  const run = async (ns: Netns, args: string[]) => {
    const [cmd, argv] = ns.wrap(process.execPath, [MESHP, ...args]);
    try {
      return (await sh(cmd, argv)).stdout;
    } catch (e) {
      throw new Error(`meshp ${args.join(' ')}: ${(e as { stderr?: string }).stderr ?? String(e)}`);
    }
  };
  const c: Node = { name: 'm1', ns: cNs, ifname: `${prefix}w0`, state: join(ctlState, 'agent'), proc: null, args: [] };
  nodes.push(c);
  const genesis = JSON.parse(
    await run(cNs, [
      'genesis',
      '--state',
      ctlState,
      '--root',
      root,
      '--docker-socket',
      engine.socket,
      '--images',
      LAB_IMAGES,
      '--node',
      'm1',
      '--endpoint',
      `${m.controlIp}:51820`,
      '--tunnel-interface',
      c.ifname,
      '--yes',
      '--json',
    ]),
  ) as MeshBed['genesis'];
  c.args = ['agent', '--state', c.state, '--root', root, '--docker-socket', engine.socket, '--name', 'm1', '--interval', '2'];
  const agents = m.agents.map(({ name, ns, endpoint: told }, k): Node => {
    const state = join(dir, name, 'state');
    const aroot = join(dir, name, 'root');
    mkdirSync(aroot, { recursive: true });
    const ifname = `${prefix}w${k + 1}`;
    const endpoint = told ? ['--endpoint', told] : [];
    // No --tunnel: genesis made the network a tunnel network, its tokens say so (issue 33); the interface is named only to be unique here.
    return {
      name,
      ns,
      ifname,
      state,
      proc: null,
      args: [
        'agent',
        '--state',
        state,
        '--controller',
        `${m.controlIp}:7443`,
        '--name',
        name,
        '--root',
        aroot,
        '--firewall',
        'none',
        '--docker-socket',
        join(dir, name, 'absent.sock'),
        '--interval',
        '2',
        ...endpoint,
        '--tunnel-interface',
        ifname,
      ],
    };
  });
  nodes.push(...agents);
  for (const a of agents) {
    // The services the policy is about: PORT (allowed by rules), OTHER_PORT (never allowed).
    // A connection cut by the filter (established flows are dropped at once) resets: never fatal to the server.
    const js = `for (const p of [${PORT}, ${OTHER_PORT}]) require('net').createServer((s) => { s.on('error', () => {}); s.end('hi\\n'); }).listen(p, '0.0.0.0');`;
    new Proc(t, [js], a.ns, '-e', process.execPath);
  }
  const cli = (...args: string[]) => run(cNs, [...args, '--state', ctlState, '--controller', `127.0.0.1:7443`]);
  let policies = 0;
  const b: MeshBed = {
    prefix,
    dir,
    under,
    c,
    agents,
    outside,
    engine,
    ctlState,
    genesis,
    cli,
    ctl: null as unknown as Proc,
    policy: (rules) => cli('policy', 'set', writeJson(dir, `p${++policies}.json`, { rules }), '--yes'),
    async startController() {
      b.ctl = new Proc(t, ['controller', 'serve', '--state', ctlState, '--listen', `0.0.0.0:7443`, ...(m.controllerArgs ?? [])], cNs);
      await b.ctl.waitFor((l) => l.msg === 'controller serving', 60_000);
    },
    startAgent(n, extra = []) {
      n.proc = new Proc(t, [...n.args, ...extra], n.ns);
      return n.proc;
    },
  };
  await b.startController();
  return b;
}

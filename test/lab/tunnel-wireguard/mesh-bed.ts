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

/** `count`: the agents a1..aN (3 unless asked; routes.test.ts asks 4: two routers); `tag`: the first 3 characters of every namespace and link. */
export async function meshBed(t: Teardown, dir: string, count = 3, tag = 'wgm'): Promise<MeshBed> {
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
  const { under, machine } = await underlay(t, prefix);
  const cNs = await machine('c', CONTROL_IP, 0);
  // The engine starts while the other machines are made.
  const [engine, outside, ...agentNs] = await Promise.all([
    startDockerd(t, { netns: cNs, tag: 'wgd' }),
    machine('o', OUTSIDE_IP, 9),
    ...Array.from({ length: count }, (_, k) => k + 1).map((i) => machine(`a${i}`, `10.97.0.${i}`, i)),
  ]);
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
      `${CONTROL_IP}:51820`,
      '--tunnel-interface',
      c.ifname,
      '--yes',
      '--json',
    ]),
  ) as MeshBed['genesis'];
  c.args = ['agent', '--state', c.state, '--root', root, '--docker-socket', engine.socket, '--name', 'm1', '--interval', '2'];
  const agents = agentNs.map((ns, k): Node => {
    const name = `a${k + 1}`;
    const state = join(dir, name, 'state');
    const aroot = join(dir, name, 'root');
    mkdirSync(aroot, { recursive: true });
    const ifname = `${prefix}w${k + 1}`;
    // a3 is told no endpoint: its peers find it where the controller saw it.
    const endpoint = k === 2 ? [] : ['--endpoint', `10.97.0.${k + 1}:51820`];
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
        CONTROL,
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
      b.ctl = new Proc(t, ['controller', 'serve', '--state', ctlState, '--listen', `0.0.0.0:7443`], cNs);
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

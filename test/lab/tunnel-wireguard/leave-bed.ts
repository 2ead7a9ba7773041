/**
 * A member machine for the leave tests (issue 33 item 9): one namespace holding a found nftables
 * firewall (`table inet filter`, policy drop, its own rules), a controller on its loopback, and
 * agents started with the nftables plugin and the WireGuard tunnel (wireguard-go). Teardown: the
 * agents and the controller by pid (Proc), each wireguard-go by the pid its state folder kept, its
 * socket, the namespace.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { MESHP, Proc, workdir } from '../../helpers/grpc-procs.js';
import { netns, runPrefix, type Netns } from '../../helpers/netns.js';
import { Deadline } from '../../helpers/budget.js';
import { alive } from './bed.js';
import { readIf } from './mesh-bed.js';

interface Teardown {
  teardown(fn: () => unknown): void;
}

/** The predecessor's firewall: what must be there byte for byte after the node left. */
export const FOUND = `table inet filter {
	chain input {
		type filter hook input priority filter; policy drop;
		iif "lo" accept
		ct state established,related accept
		tcp dport 22 accept comment "predecessor ssh"
	}
}
`;

export interface Member {
  ns: Netns;
  dir: string;
  prefix: string;
  controller: string;
  cli(...args: string[]): { code: number | null; out: string; err: string };
  token(): string;
  /** An agent with the tunnel (interface `${prefix}${id}`) and the nftables plugin, or with neither. */
  agent(name: string, o: { tunnel: boolean; token?: string }): { proc: Proc; state: string; ifname: string; args: string[] };
  found(): Promise<string>;
  ruleset(): Promise<string>;
  link(ifname: string): Promise<boolean>;
}

export const wgPidOf = (state: string, ifname: string): number => Number(readIf(join(state, 'wireguard', `${ifname}.pid`)) ?? 0);

export async function member(t: Teardown, tag: string): Promise<Member> {
  const prefix = runPrefix(tag);
  const dir = workdir(t, tag);
  const tunnels: { state: string; ifname: string }[] = [];
  const killTunnels = async () => {
    for (const { state, ifname } of tunnels) {
      const pid = wgPidOf(state, ifname);
      if (pid && alive(pid)) {
        process.kill(pid, 'SIGTERM');
        const d = new Deadline(5_000);
        while (alive(pid) && !d.expired()) await new Promise((r) => setTimeout(r, 50));
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
      spawnSync('rm', ['-f', `/var/run/wireguard/${ifname}.sock`]);
    }
  };
  t.teardown(killTunnels);
  process.once('exit', () => {
    for (const { state, ifname } of tunnels) {
      const pid = wgPidOf(state, ifname);
      if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });
  const ns = await netns(t, `${prefix}n`);
  await ns.exec('nft', ['-f', '-'], FOUND);
  const ctlState = join(dir, 'ctl');
  const ctl = new Proc(t, ['controller', 'serve', '--state', ctlState, '--listen', '127.0.0.1:0'], ns);
  const controller = String((await ctl.waitFor((l) => l.msg === 'controller serving', 60_000)).address);
  const cli = (...args: string[]) => {
    const r = spawnSync('nsenter', [`--net=${ns.path}`, '--', process.execPath, MESHP, ...args], { encoding: 'utf8', timeout: 120_000 });
    return { code: r.status, out: r.stdout, err: r.stderr };
  };
  let n = 0;
  return {
    ns,
    dir,
    prefix,
    controller,
    cli,
    token() {
      const r = cli('token', 'create', '--adopted', '--state', ctlState, '--controller', controller, '--json');
      if (r.code !== 0) throw new Error(`token create: ${r.err}`);
      return (JSON.parse(r.out) as { token: string }).token;
    },
    agent(name, o) {
      const state = join(dir, name);
      mkdirSync(join(dir, `${name}-root`), { recursive: true });
      const ifname = `${prefix}w${++n}`;
      const args = [
        'agent',
        '--state',
        state,
        '--controller',
        controller,
        '--name',
        name,
        '--root',
        join(dir, `${name}-root`),
        '--docker-socket',
        join(dir, 'absent.sock'),
        '--interval',
        '1',
        ...(o.tunnel ? ['--firewall', 'nftables', '--tunnel', 'wireguard', '--tunnel-interface', ifname] : ['--firewall', 'none']),
      ];
      if (o.tunnel) tunnels.push({ state, ifname });
      return { proc: new Proc(t, [...args, ...(o.token ? ['--token', o.token] : [])], ns), state, ifname, args };
    },
    found: async () => (await ns.exec('nft', ['list', 'table', 'inet', 'filter'])).stdout,
    ruleset: async () => (await ns.exec('nft', ['list', 'ruleset'])).stdout,
    link: (ifname) =>
      ns.exec('ip', ['link', 'show', 'dev', ifname]).then(
        () => true,
        () => false,
      ),
  };
}

/** The process's exit status, or 'still running' once `idleSeconds` of idle-machine time passed (a removed agent that retries for ever). */
export async function exitsWithin(p: Proc, idleSeconds: number): Promise<number | null | 'still running'> {
  const d = new Deadline(idleSeconds * 1000);
  let done = false;
  const code = p.exited.then((c) => {
    done = true;
    return c;
  });
  while (!done && !d.expired()) await Promise.race([code, new Promise((r) => setTimeout(r, 200))]);
  return done ? code : 'still running';
}

/** The found table's listing without the mesh's marked rules: what the predecessor wrote. */
export const unmarked = (listing: string): string =>
  listing
    .split('\n')
    .filter((l) => !l.includes('comment "meshp:'))
    .join('\n');

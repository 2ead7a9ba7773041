/**
 * A real mesh over its own tunnel: a controller and three agents (`meshp agent --tunnel wireguard`),
 * each in its own namespace, joined only by an underlay bridge. The agents enrol over the underlay
 * with their tunnel keys, get each other's keys from the controller's deltas, and ping each other
 * over their mesh addresses. A policy that hides a3 from a1 cuts that pair while a1 keeps a3's
 * WireGuard peer (its grace period); `meshp node remove a3` then takes a3's peer off a1 (which had
 * it only in grace) and off a2, and a3 reaches no one with its old keys.
 */
import t from 'tap';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { MESHP, Proc, workdir, writeJson } from '../../helpers/grpc-procs.js';
import { labAvailable, netns, runPrefix, sh, type Netns } from '../../helpers/netns.js';
import { publicKeyOf } from '@meshp/tunnel-wireguard';
import { alive } from './bed.js';

const CONTROL = '10.97.0.10:7443';

interface Agent {
  name: string;
  ns: Netns;
  ifname: string;
  state: string;
  proc: Proc | null;
  args: string[];
}

t.test('a controller and three agents carry traffic over the tunnel', { skip: labAvailable() ? false : 'needs root for namespaces and wireguard-go (CI runs it as root)' }, async (t) => {
  const prefix = runPrefix('wgm');
  const dir = workdir(t, 'wgmesh');
  const agents: Agent[] = [];
  // Registered before anything starts: agents by pid, then each wireguard-go by the pid its agent kept, then sockets.
  t.teardown(async () => {
    for (const a of agents) a.proc?.kill('SIGKILL');
    for (const a of agents) {
      const pid = Number(readIf(join(a.state, 'wireguard', `${a.ifname}.pid`)));
      if (pid && alive(pid)) {
        process.kill(pid, 'SIGTERM');
        for (let i = 0; i < 100 && alive(pid); i++) await sleep(50);
        if (alive(pid)) process.kill(pid, 'SIGKILL');
      }
      rmSync(`/var/run/wireguard/${a.ifname}.sock`, { force: true });
    }
  });

  const under = await netns(t, `${prefix}u`);
  await under.exec('ip', ['link', 'add', 'br0', 'type', 'bridge']);
  await under.exec('ip', ['link', 'set', 'br0', 'up']);
  const machine = async (name: string, address: string, i: number) => {
    const ns = await netns(t, `${prefix}${name}`);
    const [a, b] = [`${prefix}v${i}a`, `${prefix}v${i}b`];
    await sh('ip', ['link', 'add', a, 'type', 'veth', 'peer', 'name', b]);
    await sh('ip', ['link', 'set', a, 'netns', ns.name]);
    await sh('ip', ['link', 'set', b, 'netns', under.name]);
    await ns.exec('ip', ['addr', 'add', `${address}/24`, 'dev', a]);
    await ns.exec('ip', ['link', 'set', a, 'up']);
    await under.exec('ip', ['link', 'set', b, 'master', 'br0', 'up']);
    return ns;
  };

  // The machines are made while the controller starts: on a loaded machine node's start-up is most of the time.
  const ctlNs = await machine('c', CONTROL.split(':')[0]!, 0);
  const ctlState = join(dir, 'ctl');
  const ctl = new Proc(t, ['controller', 'serve', '--state', ctlState, '--listen', CONTROL], ctlNs);
  const spec = [[1, 'x'], [2, 'y'], [3, 'z']] as const;
  const machines = await Promise.all(spec.map(([i]) => machine(`a${i}`, `10.97.0.${i}`, i)));
  await ctl.waitFor((l) => l.msg === 'controller serving', 60_000);
  /** The operator's CLI, on the controller's machine; async, so the processes' logs keep flowing meanwhile. */
  const cli = async (...args: string[]): Promise<string> => {
    const [cmd, argv] = ctlNs.wrap(process.execPath, [MESHP, ...args, '--state', ctlState, '--controller', CONTROL]);
    try {
      return (await sh(cmd, argv)).stdout;
    } catch (e) {
      throw new Error(`meshp ${args.join(' ')}: ${(e as { stderr?: string }).stderr ?? String(e)}`);
    }
  };
  let policies = 0;
  const policy = (rules: [string, string][]) => cli('policy', 'set', writeJson(dir, `p${++policies}.json`, { rules: rules.map(([from, to]) => ({ from, to })) }), '--yes');
  const all: [string, string][] = [['x', 'y'], ['y', 'x'], ['x', 'z'], ['z', 'x'], ['y', 'z'], ['z', 'y']];
  const [, ...tokens] = await Promise.all([policy(all), ...spec.map(async ([, tag]) => (JSON.parse(await cli('token', 'create', '--tag', tag, '--json')) as { token: string }).token)]);

  for (const [k, [i]] of spec.entries()) {
    const name = `a${i}`;
    const ns = machines[k]!;
    const state = join(dir, name, 'state');
    const root = join(dir, name, 'root');
    mkdirSync(root, { recursive: true });
    const a: Agent = { name, ns, ifname: `${prefix}w${i}`, state, proc: null, args: [] };
    agents.push(a);
    a.args = ['agent', '--state', state, '--controller', CONTROL, '--name', name, '--root', root, '--firewall', 'none', '--docker-socket', join(dir, name, 'absent.sock'),
      '--interval', '5', '--endpoint', `10.97.0.${i}:51820`, '--tunnel', 'wireguard', '--tunnel-interface', a.ifname];
    a.proc = new Proc(t, [...a.args, '--token', tokens[k]!], ns);
  }
  const [a1, a2, a3] = agents as [Agent, Agent, Agent];

  /** The public key of the private key the agent keeps in its state folder. */
  const keyOf = (a: Agent) => publicKeyOf(readIf(join(a.state, 'wireguard', `${a.ifname}.key`)) ?? '');
  const wgPeers = async (a: Agent): Promise<string[]> => {
    const { stdout } = await a.ns.exec('wg', ['show', a.ifname, 'peers']);
    return stdout.split('\n').filter(Boolean).sort();
  };
  const meshAddress = async (a: Agent): Promise<string> => {
    const { stdout } = await a.ns.exec('ip', ['-j', 'addr', 'show', 'dev', a.ifname]);
    const info = JSON.parse(stdout) as { addr_info: { family: string; local: string }[] }[];
    return info[0]?.addr_info.find((x) => x.family === 'inet')?.local ?? '';
  };
  /** One ping over the tunnel; the first may wait for the handshake, so a few tries. */
  const pings = async (from: Agent, to: string, tries: number): Promise<boolean> => {
    for (let i = 0; i < tries; i++) {
      const ok = await from.ns.exec('busybox', ['ping', '-c', '1', '-W', '1', to]).then(() => true, () => false);
      if (ok) return true;
    }
    return false;
  };

  await t.test('the agents enrol with their keys and each configures the two others from the deltas', async (t) => {
    for (const a of agents) await a.proc!.waitFor((l) => l.msg === 'tunnel attached', 60_000);
    const keys = new Map(agents.map((a) => [a.name, keyOf(a)]));
    t.ok([...keys.values()].every((k) => k.length === 44), 'each agent made its key in its state folder');
    for (const a of agents) {
      const want = agents.filter((b) => b !== a).map((b) => keys.get(b.name)!).sort();
      await until(`${a.name} holds the two other keys`, async () => JSON.stringify(await wgPeers(a)) === JSON.stringify(want), 30_000);
      t.pass(`${a.name}'s interface holds exactly the keys of the two others`);
    }
  });

  const addr = new Map<Agent, string>();
  await t.test('every agent pings every other over its mesh address', async (t) => {
    for (const a of agents) addr.set(a, await meshAddress(a));
    t.same([...addr.values()].map((x) => x.startsWith('100.96.')), [true, true, true], 'mesh addresses from the private range');
    for (const a of agents) for (const b of agents) if (a !== b) t.ok(await pings(a, addr.get(b)!, 5), `${a.name} → ${b.name} over the tunnel`);
  });

  await t.test('a policy that hides a3 from a1 cuts that pair; a1 keeps a3 configured (grace)', async (t) => {
    const mark = a1.proc!.lines.length;
    await policy(all.filter(([f, to]) => !(f === 'x' && to === 'z') && !(f === 'z' && to === 'x')));
    await a1.proc!.waitFor((l) => l.msg === 'applied' && Number(l.unscoped) === 1, 30_000, mark);
    await a1.proc!.waitFor((l) => l.msg !== 'applied', 5_000, a1.proc!.lines.length - 1).catch(() => undefined);
    t.notOk(await pings(a1, addr.get(a3)!, 1), 'a1 → a3 no longer answered');
    t.ok((await wgPeers(a1)).includes(keyOf(a3)), "a3's peer is still on a1's interface");
    t.ok(await pings(a1, addr.get(a2)!, 3), 'a1 → a2 still answered');
  });

  await t.test('node remove a3: its peer leaves a1 (held in grace) and a2 at once; its old keys reach no one', async (t) => {
    const k3 = keyOf(a3);
    const mark = ctl.lines.length;
    const removing = cli('node', 'remove', 'a3', '--yes');
    const removedAt = Number((await ctl.waitFor((l) => l.msg === 'node removed: credential and key revoked', 60_000, mark)).time);
    const gone = await Promise.all([a1, a2].map(async (a) => {
      await until(`${a.name} drops a3's key`, async () => !(await wgPeers(a)).includes(k3), 15_000);
      return Date.now() - removedAt;
    }));
    await removing;
    t.pass("a3's peer is gone from a1 and a2");
    t.comment(`a3's peer seen gone by \`wg show\` (polled) ${gone.join(' and ')} ms after the controller removed it (a1, a2)`);
    t.notOk(await pings(a3, addr.get(a2)!, 2), 'a3 → a2 not answered');
    t.notOk(await pings(a3, addr.get(a1)!, 1), 'a3 → a1 not answered');
    t.ok(await pings(a1, addr.get(a2)!, 3), 'a1 → a2 still answered');
  });

  await t.test("a1 restarted with a new key: its report carries it, a2's interface swaps it in, traffic resumes", async (t) => {
    const old = keyOf(a1);
    const wgPid = Number(readIf(join(a1.state, 'wireguard', `${a1.ifname}.pid`)));
    a1.proc!.kill('SIGTERM');
    await a1.proc!.exited;
    t.ok(alive(wgPid), "wireguard-go outlives the agent's stop");
    rmSync(join(a1.state, 'wireguard', `${a1.ifname}.key`));
    a1.proc = new Proc(t, a1.args, a1.ns);
    await a1.proc.waitFor((l) => l.msg === 'tunnel attached', 60_000);
    const fresh = keyOf(a1);
    t.not(fresh, old, 'a new key in the state folder');
    t.equal(Number(readIf(join(a1.state, 'wireguard', `${a1.ifname}.pid`))), wgPid, 'the restarted agent adopted the running wireguard-go');
    await until("a2 holds a1's new key and not the old one", async () => JSON.stringify(await wgPeers(a2)) === JSON.stringify([fresh]), 30_000);
    t.pass("a2's interface holds a1's new key only");
    t.ok(await pings(a1, addr.get(a2)!, 5), 'a1 → a2 answered with the new key');
  });
});

function readIf(file: string): string | null {
  try {
    return readFileSync(file, 'utf8').trim();
  } catch {
    return null;
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function until(what: string, fn: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await fn().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out: ${what}`);
    await sleep(100);
  }
}

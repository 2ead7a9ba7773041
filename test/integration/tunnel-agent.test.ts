/**
 * `meshp agent --tunnel wireguard` in a lab namespace (controller there too): the agent raises its
 * WireGuard interface with wireguard-go, from the key in its state folder (0600), says so in its
 * log; a restart of the agent leaves wireguard-go running and the new agent adopts it by its pid.
 */
import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { publicKeyOf } from '@meshp/tunnel-wireguard';
import { labAvailable, netns, runPrefix } from '../helpers/netns.js';
import { MESHP, Proc, workdir } from '../helpers/grpc-procs.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

t.test('the agent carries the tunnel', { skip: labAvailable() ? false : 'needs root for a namespace and wireguard-go (CI runs it as root)' }, async (t) => {
  const prefix = runPrefix('tag');
  const ifname = `${prefix}w`;
  const dir = workdir(t, 'tunnel');
  const agentState = join(dir, 'agent');
  const pidFile = join(agentState, 'wireguard', `${ifname}.pid`);
  t.teardown(() => {
    let pid = 0;
    try {
      pid = Number(readFileSync(pidFile, 'utf8').trim());
    } catch {
      // never started
    }
    if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    spawnSync('rm', ['-f', `/var/run/wireguard/${ifname}.sock`]);
  });
  const ns = await netns(t, `${prefix}n`);
  const ctl = new Proc(t, ['controller', 'serve', '--state', join(dir, 'ctl'), '--listen', '127.0.0.1:0', '--metrics-listen', '127.0.0.1:0'], ns);
  const address = String((await ctl.waitFor((l) => l.msg === 'controller serving', 60_000)).address);
  const tok = spawnSync(
    'nsenter',
    [`--net=${ns.path}`, '--', process.execPath, MESHP, 'token', 'create', '--state', join(dir, 'ctl'), '--controller', address, '--json'],
    { encoding: 'utf8' },
  );
  t.equal(tok.status, 0, tok.stderr);
  const token = (JSON.parse(tok.stdout) as { token: string }).token;
  const agentArgs = [
    'agent',
    '--state',
    agentState,
    '--controller',
    address,
    '--name',
    'a1',
    '--root',
    join(dir, 'root'),
    '--firewall',
    'none',
    '--docker-socket',
    join(dir, 'absent.sock'),
    '--tunnel',
    'wireguard',
    '--tunnel-interface',
    ifname,
  ];
  const a1 = new Proc(t, [...agentArgs, '--token', token], ns);
  const up = await a1.waitFor((l) => l.msg === 'tunnel attached', 60_000);
  t.equal(up.implementation, 'wireguard-go', 'the log says which WireGuard carries the tunnel');
  t.equal(up.adopted, false);
  const keyFile = join(agentState, 'wireguard', `${ifname}.key`);
  t.equal(statSync(keyFile).mode & 0o777, 0o600, 'the private key is 0600 in the state folder');
  const shown = await ns.exec('wg', ['show', ifname, 'public-key']);
  t.equal(shown.stdout.trim(), publicKeyOf(readFileSync(keyFile, 'utf8').trim()), 'the interface speaks with that key');
  const pid = Number(up.pid);
  a1.kill('SIGTERM');
  await a1.exited;
  t.ok(alive(pid), 'wireguard-go outlives the agent');
  const again = new Proc(t, agentArgs, ns);
  const adopted = await again.waitFor((l) => l.msg === 'tunnel attached', 60_000);
  t.equal(adopted.adopted, true, 'the restarted agent adopts the running interface');
  t.equal(adopted.pid, pid, 'by its pid');
});

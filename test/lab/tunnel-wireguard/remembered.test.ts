/**
 * The tunnel is remembered (issue 33 item 3), with a real controller, real agents and wireguard-go in
 * namespaces: in a network whose private network is the tunnel (as genesis makes it), a member
 * started with no tunnel flags raises the tunnel (meshp0, the default); restarted with no flags, and
 * with `--tunnel wireguard` alone, it keeps the same interface, process and public key (`wg show`);
 * restarted naming another interface it is refused with MESHP_TUNNEL_MISMATCH naming both, and nothing
 * changed; `--tunnel-move` moves it with its key, and a restart with `--tunnel wireguard` alone keeps
 * the moved one. A member started with `--tunnel none` is NO-TUNNEL in `node list --json`, and so is
 * one whose wireguard-go cannot start (/dev/null mounted over it, in its mount namespace only); one
 * started from examples/systemd/meshp-agent.service's ExecStart, as shipped, raises the tunnel and
 * holds the address `node list` gives.
 *
 * Each agent (and `wg`) runs in a private mount namespace where /var/run/wireguard is a folder of
 * this test: the default name meshp0 is then this test's alone, whatever else runs on the machine.
 */
import t from 'tap';
import { chmodSync, existsSync, mkdirSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { AuthStore, Controller, SqliteControllerStore } from '@meshp/controller';
import { publicKeyOf } from '@meshp/tunnel-wireguard';
import { MESHP, Proc, workdir } from '../../helpers/grpc-procs.js';
import { Netns, labAvailable, netns, runPrefix, sh, wire } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { alive } from './bed.js';

fileBudget(150);

const CTL_IP = '10.98.1.1';

interface NodeRow {
  name: string;
  status: string;
  statusDetail: string;
  tunnel: string | null;
  tunnelInterface: string | null;
}

/** A namespace's network, in a private mount namespace where /var/run/wireguard is `wgRun`. */
class IsolatedNs extends Netns {
  /** `noWireguardGo`: /dev/null mounted over the binary in that mount namespace, so it cannot start (a real failure, nothing faked in meshp). */
  constructor(
    ns: Netns,
    readonly wgRun: string,
    readonly env: Record<string, string> = {},
    readonly noWireguardGo = false,
  ) {
    super(ns.name);
  }

  override wrap(cmd: string, args: string[]): [string, string[]] {
    const env = Object.entries(this.env).map(([k, v]) => `${k}=${v}`);
    const hide = this.noWireguardGo ? 'mount --bind /dev/null "$(command -v wireguard-go)" && ' : '';
    return [
      'unshare',
      [
        '-m',
        '--propagation',
        'private',
        'sh',
        '-c',
        `n="$1"; shift; mount --bind "$0" /var/run/wireguard && ${hide}exec nsenter --net="$n" -- "$@"`,
        this.wgRun,
        this.path,
        'env',
        ...env,
        cmd,
        ...args,
      ],
    ];
  }

  override exec(cmd: string, args: string[], input?: string) {
    return sh(...this.wrap(cmd, args), input);
  }
}

t.test(
  'a member of a tunnel network raises the tunnel unasked and keeps it',
  { skip: labAvailable() ? false : 'needs root for namespaces and wireguard-go (CI runs it as root)' },
  async (t) => {
    const prefix = runPrefix('tmr');
    const dir = workdir(t, 'tunmem');
    const wgRun = join(dir, 'wgrun');
    mkdirSync(wgRun, { mode: 0o700 });
    // The mount point must exist on the machine (wireguard-go makes it too); nothing is mounted on it there.
    mkdirSync('/var/run/wireguard', { recursive: true, mode: 0o700 });
    const s1 = join(dir, 'm1', 'state');
    const wgDir = join(s1, 'wireguard');
    const s3 = join(dir, 'm3', 'state');
    const pidsIn = (d: string) =>
      existsSync(d)
        ? readdirSync(d)
            .filter((f) => f.endsWith('.pid'))
            .map((f) => Number(readFileSync(join(d, f), 'utf8')))
        : [];
    const pids = () => [...pidsIn(wgDir), ...pidsIn(join(s3, 'wireguard')), ...pidsIn(join(dir, 'm4', 'state', 'wireguard'))];
    const killWg = () => {
      for (const pid of pids()) if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
    };
    t.teardown(killWg);
    process.once('exit', killWg);

    const [c, n1, n2, n3] = (await Promise.all(['c', 'm1', 'm2', 'm3'].map((x) => netns(t, `${prefix}${x}`)))) as [Netns, Netns, Netns, Netns];
    await wire(c, `${CTL_IP}/24`, n1, '10.98.1.2/24', `${prefix}a`);
    await wire(c, '10.98.2.1/24', n2, '10.98.2.2/24', `${prefix}b`);
    await wire(c, '10.98.3.1/24', n3, '10.98.3.2/24', `${prefix}c`);
    const [m1, m2] = [new IsolatedNs(n1, wgRun), new IsolatedNs(n2, wgRun)];
    const wg = async (...args: string[]) => (await m1.exec('wg', args)).stdout.trim();
    const links = async (ns: Netns) =>
      (JSON.parse((await ns.exec('ip', ['-j', 'link', 'show'])).stdout) as { ifname: string }[])
        .map((l) => l.ifname)
        .filter((n) => n !== 'lo' && !/^.{7}[abc][ab]$/.test(n))
        .sort(); // the veth ends: PREFIX + aa|ab|ba|bb|ca|cb

    // The network as genesis makes it without --private-interface: its private network is the tunnel.
    const ctlState = join(dir, 'ctl');
    mkdirSync(ctlState, { mode: 0o700 });
    const db = join(ctlState, 'controller.db');
    const store = new SqliteControllerStore(db);
    new Controller(store).createNetwork('default', { privateNetwork: 'tunnel' });
    store.close();
    new AuthStore(db).close();
    chmodSync(db, 0o600);
    const ctl = new Proc(t, ['controller', 'serve', '--state', ctlState, '--listen', '0.0.0.0:7443'], c);
    await ctl.waitFor((l) => l.msg === 'controller serving', 60_000);
    const cli = async (...args: string[]) => (await c.exec(process.execPath, [MESHP, ...args, '--state', ctlState, '--controller', '127.0.0.1:7443'])).stdout;
    // Adopted: a converged member with no firewall plugin is refused the flip (issue 33 item 5), which would hide the tunnel's word.
    const token = async () => (JSON.parse(await cli('token', 'create', '--adopted', '--json')) as { token: string }).token;
    const row = async (name: string) => (JSON.parse(await cli('node', 'list', '--json')) as { nodes: NodeRow[] }).nodes.find((n) => n.name === name);

    const args = (ns: Netns, name: string, state: string) => [
      'agent',
      '--state',
      state,
      '--controller',
      `${ns === m1 ? CTL_IP : '10.98.2.1'}:7443`,
      '--name',
      name,
      '--root',
      join(dir, name, 'root'),
      '--firewall',
      'none',
      '--docker-socket',
      join(dir, name, 'absent.sock'),
      '--interval',
      '1',
    ];
    for (const n of ['m1', 'm2']) mkdirSync(join(dir, n, 'root'), { recursive: true });
    const startM1 = (extra: string[]) => new Proc(t, [...args(m1, 'm1', s1), ...extra], m1);
    const stop = async (p: Proc) => {
      p.kill('SIGTERM');
      await p.exited;
    };
    const [tok1, tok2, tok3, tok4] = await Promise.all([token(), token(), token(), token()]);
    const record = () => readFileSync(join(s1, 'tunnel.json'), 'utf8');

    let pid = 0;
    let key = '';
    await t.test('started with no tunnel flags: it raises meshp0 and records it', async (t) => {
      const p = startM1(['--token', tok1]);
      const up = await p.waitFor((l) => l.msg === 'tunnel attached', 40_000);
      t.equal(up.interface, 'meshp0', 'the default interface, no --tunnel given');
      pid = Number(up.pid);
      key = await wg('show', 'meshp0', 'public-key');
      t.equal(key, publicKeyOf(readFileSync(join(wgDir, 'meshp0.key'), 'utf8').trim()), "wg show: the interface speaks with the state folder's key");
      t.same(JSON.parse(record()), { tunnel: 'wireguard', interface: 'meshp0', publicKey: key }, 'tunnel.json: the choice, the interface, the key');
      const r = await until(
        'm1 reported up',
        async () => {
          const x = await row('m1');
          return x?.tunnel === 'up' ? x : null;
        },
        30,
      );
      t.equal(r.status, 'ok', 'node list: ok, its tunnel up');
      await stop(p);
    });

    for (const [label, extra] of [
      ['no tunnel flags', []],
      ['--tunnel wireguard alone', ['--tunnel', 'wireguard']],
    ] as const) {
      await t.test(`restarted with ${label}: the same interface, wireguard-go and key`, async (t) => {
        const p = startM1([...extra]);
        const up = await p.waitFor((l) => l.msg === 'tunnel attached', 40_000);
        t.match(up, { interface: 'meshp0', adopted: true, pid }, 'meshp0 adopted: the same wireguard-go');
        t.equal(await wg('show', 'meshp0', 'public-key'), key, 'wg show: the same public key');
        t.same(await links(m1), ['meshp0'], 'no second interface');
        await stop(p);
      });
    }

    await t.test('restarted naming another interface: refused with the code, naming both; nothing changed', async (t) => {
      const before = record();
      const other = `${prefix}x`;
      const p = startM1(['--tunnel', 'wireguard', '--tunnel-interface', other]);
      t.equal(await p.exited, 1, 'the agent exits, refused');
      t.match(p.stderr, new RegExp(`MESHP_TUNNEL_MISMATCH: --tunnel-interface ${other}: this node's tunnel is meshp0, key ${key.replace(/[+/]/g, '\\$&')}`));
      t.match(p.stderr, /--tunnel-move/, 'the way to move it said');
      t.ok(alive(pid), 'wireguard-go still runs');
      t.equal(await wg('show', 'meshp0', 'public-key'), key, 'the same key on meshp0');
      t.same(await links(m1), ['meshp0'], `no ${other}`);
      t.equal(record(), before, 'tunnel.json byte for byte');
      t.notOk(existsSync(join(wgDir, `${other}.key`)), 'no key made for it');
    });

    await t.test('--tunnel-move: the tunnel moves with its key, the old interface goes', async (t) => {
      const other = `${prefix}y`;
      const p = startM1(['--tunnel-interface', other, '--tunnel-move']);
      const up = await p.waitFor((l) => l.msg === 'tunnel attached', 40_000);
      t.equal(up.interface, other);
      t.equal(await wg('show', other, 'public-key'), key, 'the same key on the new interface');
      t.same(await links(m1), [other], 'meshp0 gone: one interface');
      t.notOk(alive(pid), "meshp0's wireguard-go stopped by its pid");
      t.same(JSON.parse(record()), { tunnel: 'wireguard', interface: other, publicKey: key }, 'recorded');
      await stop(p);
    });

    await t.test('restarted with --tunnel wireguard but not the --tunnel-interface it was last given: that interface, not a second one', async (t) => {
      const other = `${prefix}y`;
      const p = startM1(['--tunnel', 'wireguard']);
      const up = await p.waitFor((l) => l.msg === 'tunnel attached', 40_000);
      t.match(up, { interface: other, adopted: true }, `${other} adopted, no meshp0 raised`);
      t.equal(await wg('show', other, 'public-key'), key, 'the same key');
      t.same(await links(m1), [other], 'one interface');
      await stop(p);
    });

    await t.test('a member started with --tunnel none is flagged NO-TUNNEL, its address not claimed', async (t) => {
      const s2 = join(dir, 'm2', 'state');
      const p = new Proc(t, [...args(m2, 'm2', s2), '--tunnel', 'none', '--token', tok2], m2);
      await p.waitFor((l) => l.msg === 'reconciled', 60_000);
      const r = await until(
        'm2 reported',
        async () => {
          const x = await row('m2');
          return x?.tunnel ? x : null;
        },
        30,
      );
      t.match(r, { status: 'no-tunnel', tunnel: 'none' }, 'node list --json');
      t.match(r.statusDetail, /runs no tunnel.*mesh address 100\.96\.0\.\d+ is not held/);
      t.same(await links(m2), [], 'it holds no tunnel interface');
      t.same(JSON.parse(readFileSync(join(s2, 'tunnel.json'), 'utf8')), { tunnel: 'none' }, 'the opt-out recorded');
    });

    await t.test('a member whose tunnel fails to come up (wireguard-go cannot start) is flagged NO-TUNNEL, saying why', async (t) => {
      const s4 = join(dir, 'm4', 'state');
      mkdirSync(join(dir, 'm4', 'root'), { recursive: true });
      const m4 = new IsolatedNs(n2, join(dir, 'wgrun4'), {}, true);
      mkdirSync(m4.wgRun, { mode: 0o700 });
      const p = new Proc(t, [...args(m2, 'm4', s4), '--token', tok4], m4);
      const refused = await p.waitFor((l) => l.msg === 'tunnel change refused', 40_000);
      t.match(refused.err, /^MESHP_TUNNEL_UNAVAILABLE: wireguard-go could not be started/, 'the agent logs why');
      const r = await until(
        'm4 reported its tunnel down',
        async () => {
          const x = await row('m4');
          return x?.tunnel === 'down' ? x : null;
        },
        30,
      );
      t.equal(r.status, 'no-tunnel', 'node list --json: not ok');
      t.match(r.statusDetail, /its tunnel meshp0 failed: MESHP_TUNNEL_UNAVAILABLE: wireguard-go could not be started.*not known to be held/);
      t.match(
        JSON.parse(readFileSync(join(s4, 'tunnel.json'), 'utf8')),
        { tunnel: 'wireguard', interface: 'meshp0' },
        'the choice is recorded all the same: the next start raises it',
      );
    });

    await t.test('examples/systemd/meshp-agent.service as shipped: its ExecStart raises the tunnel and holds the address node list gives', async (t) => {
      // What an operator does: agent.env from the example with the controller and token filled in.
      const sysd = join(process.cwd(), 'examples/systemd');
      const unit = readFileSync(join(sysd, 'meshp-agent.service'), 'utf8');
      const env = Object.fromEntries(
        readFileSync(join(sysd, 'agent.env.example'), 'utf8')
          .split('\n')
          .filter((l) => /^[A-Z_]+=/.test(l))
          .map((l) => l.split(/=(.*)/s).slice(0, 2) as [string, string]),
      );
      Object.assign(env, { MESHP_CONTROLLER: '10.98.3.1:7443', MESHP_TOKEN: tok3 });
      const [bin, ...argv] = /^ExecStart=(.*)$/m
        .exec(unit)![1]!
        .split(/\s+/)
        .map((w) => w.replace(/\$\{(\w+)\}/g, (_, k: string) => env[k] ?? ''));
      t.equal(bin, '/usr/local/bin/meshp');
      t.notOk(
        argv.some((a) => a.startsWith('--tunnel')),
        'no tunnel flag in the unit',
      );
      const stateDir = `/var/lib/${/^StateDirectory=(.*)$/m.exec(unit)![1]}`;
      t.equal(argv[argv.indexOf('--state') + 1], stateDir, 'the state folder is its StateDirectory');
      // The lab's confinement only: the state folder and root in the test's folder, no Docker engine of the machine's.
      const lab = [...argv.map((a) => (a === stateDir ? s3 : a)), '--root', join(dir, 'm3', 'root'), '--docker-socket', join(dir, 'm3', 'absent.sock')];
      mkdirSync(join(dir, 'm3', 'root'), { recursive: true });
      const wgRun3 = join(dir, 'wgrun3');
      mkdirSync(wgRun3, { mode: 0o700 });
      const m3 = new IsolatedNs(n3, wgRun3, { MESHP_TOKEN: env.MESHP_TOKEN! });
      const p = new Proc(t, lab, m3);
      const up = await p.waitFor((l) => l.msg === 'tunnel attached', 40_000);
      t.equal(up.interface, 'meshp0');
      const r = await until(
        'the unit-started member reported up',
        async () => {
          const x = (JSON.parse(await cli('node', 'list', '--json')) as { nodes: (NodeRow & { addresses: string[] })[] }).nodes.find(
            (n) => n.tunnelInterface === 'meshp0' && n.tunnel === 'up' && !['m1', 'm2'].includes(n.name),
          );
          // Its tunnel up and its handshakes reported: before that report a tunnel member is UNVERIFIED
          // (nothing says it is ok by assumption), and the report with the tunnel up may come first.
          return x && x.status !== 'unverified' ? x : null;
        },
        30,
      );
      t.equal(r.status, 'ok', `node list: ${r.name} ok`);
      const held = JSON.parse((await m3.exec('ip', ['-j', 'addr', 'show', 'dev', 'meshp0'])).stdout) as { addr_info: { local: string }[] }[];
      t.ok(
        held[0]?.addr_info.some((a) => a.local === r.addresses[0]),
        `meshp0 holds ${r.addresses[0]}, the address node list gives`,
      );
      t.match(JSON.parse(readFileSync(join(s3, 'tunnel.json'), 'utf8')), { tunnel: 'wireguard', interface: 'meshp0' }, 'recorded in its state folder');
    });
  },
);

/**
 * A newcomer's walk (issue 33's done-when), driven only by the CLI as the README writes it: genesis on
 * a control-node and the two commands it prints under `next:`; two members started from the shipped
 * systemd unit (its ExecStart, its EnvironmentFile, its UMask) — one in use (a found nftables firewall
 * and an ssh session open to it), one bare; a policy; a catalogue module; the member in use converged
 * to the preview the operator saw; a member removed, its agent leaving by itself.
 *
 * What a lab must change in the unit, and nothing else: the binary is this checkout's, the state folder
 * and root are the test's, and the tunnel's interface gets a name unique on this machine (wireguard-go's
 * sockets share one folder).
 */
import t from 'tap';
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MESHP, Proc, workdir } from '../../helpers/grpc-procs.js';
import { labAvailable, runPrefix, sh, underlay, type Netns } from '../../helpers/netns.js';
import { LAB_IMAGES, startDockerd } from '../../helpers/dockerd.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { alive } from '../tunnel-wireguard/bed.js';

fileBudget(300);

const UNIT = new URL('../../../examples/systemd/meshp-agent.service', import.meta.url);
const ENV_EXAMPLE = new URL('../../../examples/systemd/agent.env.example', import.meta.url);
const C = '10.98.0.10';
const M2 = '10.98.0.2';
const M3 = '10.98.0.3';
const SSH = 22;

interface Ran {
  code: number;
  out: string;
  err: string;
}

/** systemd's reading of the unit: ExecStart's words with `${VAR}` from the environment file, and its UMask. */
function unitCommand(env: Record<string, string>): { argv: string[]; umask: string } {
  const unit = readFileSync(UNIT, 'utf8');
  const exec = /^ExecStart=(.*)$/m.exec(unit)![1]!;
  const umask = /^UMask=(\d+)$/m.exec(unit)?.[1] ?? '0022';
  return {
    argv: exec
      .trim()
      .split(/\s+/)
      .map((w) => w.replace(/\$\{(\w+)\}/g, (_, k: string) => env[k] ?? '')),
    umask,
  };
}

/** The environment file as the example ships it, its values filled. */
function envFile(values: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const line of readFileSync(ENV_EXAMPLE, 'utf8').split('\n')) {
    const m = /^([A-Z_]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]!] = values[m[1]!] ?? m[2]!;
  }
  return out;
}

t.test(
  "a newcomer's walk: genesis, two members from the shipped unit, a policy, a module, a member converged, one removed",
  { skip: labAvailable() ? false : 'needs root for namespaces, nftables, a Docker engine and wireguard-go (CI runs it as root)' },
  async (top) => {
    // Processes outlive the step that starts them: they are the walk's, ended at its end.
    const t = top;
    const dir = workdir(t, 'newcomer');
    const prefix = runPrefix('nwc');
    const ifname = (n: string) => `${prefix}${n}`;
    const wgStates: [string, string][] = [];
    const stopWireguard = () => {
      for (const [state, ifn] of wgStates) {
        const pid = Number(
          (() => {
            try {
              return readFileSync(join(state, 'wireguard', `${ifn}.pid`), 'utf8');
            } catch {
              return '0';
            }
          })(),
        );
        if (pid && alive(pid)) process.kill(pid, 'SIGKILL');
        rmSync(`/var/run/wireguard/${ifn}.sock`, { force: true });
      }
    };
    t.teardown(stopWireguard);
    process.once('exit', stopWireguard);

    // The machines: an underlay bridge, the control-node with a Docker engine, two members.
    const { machine } = await underlay(t, prefix);
    const c = await machine('c', C, 0);
    const [engine, m2, m3] = await Promise.all([startDockerd(t, { netns: c, tag: 'nwd' }), machine('m2', M2, 2), machine('m3', M3, 3)]);

    const run = async (ns: Netns, args: string[]): Promise<Ran> => {
      const [cmd, argv] = ns.wrap(process.execPath, [MESHP, ...args]);
      return sh(cmd, argv).then(
        (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
        (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, out: e.stdout ?? '', err: e.stderr ?? '' }),
      );
    };
    const state = join(dir, 'ctl');
    const root = join(dir, 'c-root');
    mkdirSync(root, { recursive: true });
    const admin = (...args: string[]) => run(c, [...args, '--state', state, '--controller', '127.0.0.1:7443']);
    const ok = async (...args: string[]) => {
      const r = await admin(...args);
      if (r.code !== 0) throw new Error(`meshp ${args.join(' ')}: exit ${r.code}: ${r.err}`);
      return r.out;
    };

    // m2 is in use: its own firewall (ssh only), its sshd, and the operator's session to it.
    const m2root = join(dir, 'm2-root');
    mkdirSync(join(m2root, 'etc'), { recursive: true });
    writeFileSync(
      join(m2root, 'etc/nftables.conf'),
      `table inet filter {\n\tchain input {\n\t\ttype filter hook input priority filter; policy drop;\n\t\tct state established,related accept\n\t\tiif "lo" accept\n\t\ttcp dport ${SSH} accept\n\t}\n}\n`,
    );
    await m2.exec('nft', ['-f', join(m2root, 'etc/nftables.conf')]);
    new Proc(t, [`require('net').createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(${SSH}, '0.0.0.0');`], m2, '-e', process.execPath);
    const tcp = (from: Netns, host: string, port: number) =>
      from.exec('timeout', ['1', 'bash', '-c', `exec 3<>/dev/tcp/${host}/${port}`]).then(
        () => true,
        () => false,
      );
    await until('sshd on m2', () => tcp(c, M2, SSH), 20, 100);
    const session = new Proc(
      t,
      [
        `const s = require('net').connect(${SSH}, '${M2}'); let n = 0; s.on('data', () => console.log(JSON.stringify({ msg: 'echo', n: ++n }))); s.on('close', () => console.log(JSON.stringify({ msg: 'closed' }))); setInterval(() => s.write('.'), 200);`,
      ],
      c,
      '-e',
      process.execPath,
    );
    await session.waitFor((l) => l.msg === 'echo', 20_000);

    let next: { controller: string[]; agent: string[] };
    await t.test('genesis, then the two commands it prints', async (t) => {
      const g = await run(c, [
        'genesis',
        '--state',
        state,
        '--root',
        root,
        '--docker-socket',
        engine.socket,
        '--images',
        LAB_IMAGES,
        '--node',
        'm1',
        '--tunnel-interface',
        ifname('w1'),
        '--endpoint',
        `${C}:51820`,
        '--yes',
        '--json',
      ]);
      t.equal(g.code, 0, g.err);
      next = (JSON.parse(g.out) as { next: typeof next }).next;
      t.equal(next.controller[0], 'meshp');
      wgStates.push([join(state, 'agent'), ifname('w1')]);
      const ctl = new Proc(top, next.controller.slice(1), c);
      await ctl.waitFor((l) => l.msg === 'controller serving', 60_000);
      new Proc(top, [...next.agent.slice(1), '--interval', '2'], c);
      await until(
        'm1 converged',
        async () => {
          const n = (JSON.parse(await ok('node', 'list', '--json')) as { nodes: { name: string; mode: string }[] }).nodes.find((x) => x.name === 'm1');
          return n?.mode === 'converged';
        },
        120,
      );
      t.pass('the control-node is up and converged by its agent');
    });

    type NodeRow = { name: string; status: string; mode: string; gap: number; appliedVersion: number };
    const nodes = async () => (JSON.parse(await ok('node', 'list', '--json')) as { nodes: NodeRow[] }).nodes;
    const member = (ns: Netns, name: string, mroot: string, token: string) => {
      const env = envFile({ MESHP_CONTROLLER: `${C}:7443`, MESHP_TOKEN: token });
      const { argv, umask } = unitCommand(env);
      const mstate = join(dir, `${name}-state`);
      mkdirSync(mroot, { recursive: true });
      const args = argv.slice(1).map((a, i, all) => (all[i - 1] === '--state' ? mstate : a));
      wgStates.push([mstate, ifname(name)]);
      // The unit's environment, as systemd hands it over: the token never on the command line.
      const saved = { ...process.env };
      Object.assign(process.env, env);
      try {
        return {
          state: mstate,
          proc: new Proc(
            top,
            [`umask ${umask} && exec "$@"`, 'sh', process.execPath, MESHP, ...args, '--root', mroot, '--name', name, '--tunnel-interface', ifname(name)],
            ns,
            '-c',
            '/bin/sh',
          ),
        };
      } finally {
        for (const k of Object.keys(env))
          if (saved[k] === undefined) delete process.env[k];
          else process.env[k] = saved[k];
      }
    };

    let a2: { state: string; proc: Proc };
    let a3: { state: string; proc: Proc };
    await t.test('two members from the shipped unit: the tunnel comes up by itself, and both say ok only when it carries', async (t) => {
      t.match(unitCommand({}).argv, ['/usr/local/bin/meshp', 'agent'], 'the unit runs the installed meshp');
      const adopted = (JSON.parse(await ok('token', 'create', '--adopted', '--tag', 'web', '--json')) as { token: string }).token;
      // A bare machine is adopted too: the unit's --firewall auto names no kind where none is in use, and a kind is never guessed.
      const bare = (JSON.parse(await ok('token', 'create', '--adopted', '--tag', 'db', '--json')) as { token: string }).token;
      a2 = member(m2, 'm2', m2root, adopted);
      a3 = member(m3, 'm3', join(dir, 'm3-root'), bare);
      await until(
        'both members ok',
        async () => {
          const n = await nodes();
          return ['m2', 'm3'].every((x) => n.find((y) => y.name === x)?.status === 'ok');
        },
        120,
      );
      const n = await nodes();
      t.match(
        n.find((x) => x.name === 'm2'),
        { mode: 'adopted', gap: 0 },
        'm2, in use, adopted',
      );
      t.match(
        n.find((x) => x.name === 'm3'),
        { mode: 'adopted', gap: 0 },
        'm3, bare, adopted',
      );
      const mesh1 = JSON.parse((await c.exec('ip', ['-j', 'addr', 'show', 'dev', ifname('w1')])).stdout)[0].addr_info.find(
        (x: { family: string }) => x.family === 'inet',
      ).local as string;
      t.ok(
        await until('m2 → the store over the tunnel', () => tcp(m2, mesh1, 15432), 30, 200).then(
          () => true,
          () => false,
        ),
        'm2 reaches the store over the tunnel',
      );
      t.ok(
        await until('m3 → the store over the tunnel', () => tcp(m3, mesh1, 15432), 30, 200).then(
          () => true,
          () => false,
        ),
        'm3 too',
      );
      t.notOk(await tcp(m3, C, 15432), 'not over the underlay');
    });

    await t.test("a policy, and a catalogue module on the bare member: its file readable under the unit's UMask", async (t) => {
      writeFileSync(join(dir, 'policy.json'), JSON.stringify({ rules: [{ from: 'web', to: 'db', ports: ['5432/tcp'] }] }));
      await ok('policy', 'set', join(dir, 'policy.json'), '--yes');
      // A module written as the shipped catalogue's manifests are; one that names a node's setting is refused, saying why.
      writeFileSync(
        join(dir, 'motd.json'),
        JSON.stringify({
          apiVersion: 'meshp/v1',
          kind: 'Module',
          name: 'motd',
          foundation: false,
          defaults: { ports: {} },
          files: [{ path: '/etc/motd.d/meshp', content: 'welcome to the mesh\n', mode: '0644' }],
        }),
      );
      await ok('catalogue', 'add', join(dir, 'motd.json'), '--yes');
      const store = await admin('catalogue', 'add', fileURLToPath(new URL('../../../examples/catalogue/store.json', import.meta.url)), '--yes');
      t.match(store.err, /^MESHP_DECLARATION_INVALID: module store .* names \{\{ports\.store\}\}/);
      await ok('module', 'assign', 'm3', 'motd', '--yes');
      await ok('module', 'take', 'm3', 'motd', '--yes');
      const file = join(dir, 'm3-root/etc/motd.d/meshp');
      await until(
        'motd written',
        async () => {
          try {
            return readFileSync(file, 'utf8') === 'welcome to the mesh\n';
          } catch {
            return false;
          }
        },
        60,
      );
      t.equal(statSync(file).mode & 0o777, 0o644, 'the file as declared');
      t.equal(statSync(join(dir, 'm3-root/etc/motd.d')).mode & 0o777, 0o755, 'its folder readable, whatever the umask');
    });

    await t.test('the member in use converged to the preview the operator saw; the ssh session marked, kept, never cut', async (t) => {
      const preview = async () =>
        JSON.parse(await ok('node', 'converge', 'm2', '--preview', '--json')) as {
          preview: { id: string; items: { port: number; protocol: string; after: string; liveConnections?: number; declaredBy: string | null }[] };
        };
      await until('the session reported', async () => ((await preview()).preview.items.find((i) => i.port === SSH)?.liveConnections ?? 0) > 0, 60);
      const first = (await preview()).preview;
      t.match(
        first.items.find((i) => i.port === SSH),
        { after: 'closes', liveConnections: 1 },
      );
      t.match(
        first.items.find((i) => i.port === 51820 && i.protocol === 'udp'),
        { after: 'open', declaredBy: 'tunnel' },
      );
      const refused = await admin('node', 'converge', 'm2', '--yes', '--preview-id', first.id);
      t.match(refused.err, /^MESHP_LIVE_SESSION: /, 'the flip that would cut the session is refused');
      await ok('module', 'assign', 'm2', 'ssh', '--yes');
      await ok('module', 'take', 'm2', 'ssh', '--yes');
      await until('ssh declared', async () => (await preview()).preview.items.find((i) => i.port === SSH)?.after === 'open', 60);
      const { id } = (await preview()).preview;
      const flip = await admin('node', 'converge', 'm2', '--yes', '--preview-id', id, '--timeout', '180');
      t.equal(flip.code, 0, flip.err);
      t.match(flip.out, new RegExp(`node m2 converged, by its agent's report \\(preview ${id}\\)`));
      const echoes = session.lines.filter((l) => l.msg === 'echo').length;
      await session.waitFor((l) => l.msg === 'echo' && Number(l.n) > echoes + 3, 20_000);
      t.notOk(
        session.lines.some((l) => l.msg === 'closed'),
        "the operator's session survived the flip",
      );
    });

    await t.test('the bare member is not converged where nothing can hold its filter: the preview says why', async (t) => {
      const p = await admin('node', 'converge', 'm3', '--preview');
      t.match(p.out, /REFUSED: node m3 has no firewall plugin that can hold the derived filter .*--firewall nftables/);
      const r = await admin('node', 'converge', 'm3', '--yes');
      t.match(r.err, /^MESHP_PROVIDER_MISSING: /);
    });

    await t.test('a member removed: its agent takes away what the mesh added and exits, as the unit expects', async (t) => {
      const r = await admin('node', 'remove', 'm3', '--yes');
      t.equal(r.code, 0, r.err);
      const code = await a3.proc.exited;
      t.equal(code, Number(/^RestartPreventExitStatus=(\d+)$/m.exec(readFileSync(UNIT, 'utf8'))?.[1]), 'the exit status the unit does not restart');
      t.match(a3.proc.stderr, /MESHP_REMOVED: node m3 /);
      const links = (await m3.exec('ip', ['-o', 'link'])).stdout;
      t.notMatch(links, new RegExp(ifname('m3')), 'its tunnel interface is gone');
      t.notOk(
        (await nodes()).some((n) => n.name === 'm3'),
        'gone from node list',
      );
      t.ok(a2.proc.alive, 'the other member keeps running');
    });
  },
);

/**
 * Record 003's central act on a member, not the control-node (issue 33, items 1 and 7): a second
 * machine in use — a found nftables firewall of its own, a service, an ssh session open to it —
 * enrolls adopted over the underlay, raises the tunnel, and is converged through the controller over
 * it: the preview the operator sees is the one the agent checks (the tunnel plugin's own UDP port
 * counted on both sides, so the flip is not refused stale), the flip that would cut the live ssh
 * session is refused until the catalogue's ssh module declares the port, the tunnel carries through
 * the flip, and the return to adopted puts the found firewall back as it was.
 */
import t from 'tap';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { MESHP, Proc, workdir } from '../../helpers/grpc-procs.js';
import { labAvailable, sh } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { PORT, STORE, keyOf, meshAddress, meshBed, reaches, reachesSoon, wgPeers } from '../tunnel-wireguard/mesh-bed.js';

fileBudget(240);

const SSH = 22;
const FOUND = `table inet filter {
	chain input {
		type filter hook input priority filter; policy drop;
		ct state established,related accept
		iif "lo" accept
		meta l4proto { icmp, ipv6-icmp } accept
		tcp dport ${SSH} accept
		tcp dport ${PORT} accept
	}
}
`;

interface PreviewJson {
  preview: { id: string; items: { port: number; protocol: string; after: string; declaredBy: string | null; liveConnections?: number }[]; steps: string[] };
}

t.test(
  'a member in use, with a found nftables firewall, converged over the tunnel and returned',
  { skip: labAvailable() ? false : 'needs root for namespaces, nftables and wireguard-go (CI runs it as root)' },
  async (t) => {
    const dir = workdir(t, 'wgmember');
    const b = await meshBed(t, dir);
    const { c } = b;
    const m = b.agents[0]!;
    // The member's own firewall, as its last admin left it (the file is what a reload would read).
    writeFileSync(join(dir, 'found.nft'), FOUND);
    await m.ns.exec('nft', ['-f', join(dir, 'found.nft')]);
    const foundRules = async () => {
      const doc = JSON.parse((await m.ns.exec('nft', ['-j', 'list', 'table', 'inet', 'filter'])).stdout) as {
        nftables: { rule?: { comment?: string; expr: unknown } }[];
      };
      return doc.nftables
        .filter((o) => o.rule && !String(o.rule.comment ?? '').startsWith('meshp:'))
        .map((o) => JSON.stringify(o.rule!.expr).replace(/"counter":\{[^}]*\}/g, ''));
    };
    const before = await foundRules();

    // Its sshd (a stand-in on port 22, echoing) and the operator's session to it from the control-node, kept open.
    new Proc(t, [`require('net').createServer((s) => { s.on('error', () => {}); s.pipe(s); }).listen(${SSH}, '0.0.0.0');`], m.ns, '-e', process.execPath);
    await until('sshd listens', () => reaches(c.ns, '10.97.0.1', SSH), 20, 100);
    const session = new Proc(
      t,
      [
        `const s = require('net').connect(${SSH}, '10.97.0.1'); let n = 0; s.on('data', () => console.log(JSON.stringify({ msg: 'echo', n: ++n }))); s.on('close', () => console.log(JSON.stringify({ msg: 'closed' }))); setInterval(() => s.write('.'), 200);`,
      ],
      c.ns,
      '-e',
      process.execPath,
    );
    await session.waitFor((l) => l.msg === 'echo', 20_000);

    // The member's agent finds the firewall (auto), and enrols adopted.
    m.args = m.args.map((a, i) => (m.args[i - 1] === '--firewall' ? 'auto' : a));
    const token = (JSON.parse(await b.cli('token', 'create', '--adopted', '--tag', 'x', '--json')) as { token: string }).token;
    b.startAgent(c);
    b.startAgent(m, ['--token', token]);
    await m.proc!.waitFor((l) => l.msg === 'tunnel attached', 90_000);
    const run = async (...args: string[]) => {
      const [cmd, argv] = c.ns.wrap(process.execPath, [MESHP, ...args, '--state', b.ctlState, '--controller', '127.0.0.1:7443']);
      return sh(cmd, argv).then(
        (r) => ({ code: 0, out: r.stdout, err: r.stderr }),
        (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? -1, out: e.stdout ?? '', err: e.stderr ?? '' }),
      );
    };
    const preview = async () => JSON.parse((await run('node', 'converge', m.name, '--preview', '--json')).out) as PreviewJson;
    const gap0 = async () => {
      const list = JSON.parse(await b.cli('node', 'list', '--json')) as { nodes: { name: string; gap: number; appliedVersion: number; mode: string }[] };
      const n = list.nodes.find((x) => x.name === m.name);
      return !!n && n.gap === 0 && n.appliedVersion > 0 && n.mode === 'adopted';
    };
    await until('the member applied its view, adopted', gap0, 60);
    const cMesh = await meshAddress(c);
    t.ok(await reachesSoon(m.ns, cMesh, STORE), 'adopted: the member reaches the store over the tunnel');
    const marked = (await m.ns.exec('nft', ['list', 'table', 'inet', 'filter'])).stdout;
    t.match(marked, /meshp:tunnel\/incoming\/udp\/51820/, "the tunnel's port opened in the found table's own terms");
    // The member's resolver answers the mesh on its mesh address: its port opened to the mesh's range only
    // (the prefix of the member's tunnel address: a member's declaration carries no range of its own).
    for (const protocol of ['udp', 'tcp'])
      t.match(
        marked,
        new RegExp(`ip saddr 100\\.96\\.0\\.0/16 ${protocol} dport 53 .*comment "meshp:dns/incoming/${protocol}/53"`),
        `the resolver's ${protocol}/53 opened from the mesh range, in the found table's own terms`,
      );

    await t.test("the preview counts the tunnel plugin's port as the agent does, and marks the live ssh session", async (t) => {
      await until('the session is in the report', async () => ((await preview()).preview.items.find((i) => i.port === SSH)?.liveConnections ?? 0) > 0, 30);
      const { preview: p } = await preview();
      const by = (port: number, protocol = 'tcp') => p.items.find((i) => i.port === port && i.protocol === protocol);
      t.match(by(51820, 'udp'), { declaredBy: 'tunnel', after: 'open' }, "51820/udp stays open: the tunnel plugin's opening, counted by the controller too");
      t.match(by(SSH), { after: 'closes', liveConnections: 1 });
      for (const protocol of ['udp', 'tcp'])
        t.match(by(53, protocol), { declaredBy: 'dns' }, `53/${protocol}: the resolver's opening, in the preview with the rest`);
      t.match(by(PORT), { after: 'closes' });
      t.match(p.steps.join('\n'), /22\/tcp .* closes with 1 live connection, perhaps your own ssh session \(they live on; no new one opens\)/);
      const human = await run('node', 'converge', m.name, '--preview');
      t.match(human.out, /22\/tcp .*WILL CLOSE: 1 LIVE \(ssh: your session\?\)/);
    });

    await t.test('the flip that would cut the session is refused, nothing changed', async (t) => {
      const { preview: p } = await preview();
      const r = await run('node', 'converge', m.name, '--yes', '--preview-id', p.id);
      t.equal(r.code, 1, r.err);
      t.match(r.err, /^MESHP_LIVE_SESSION: the flip of a1 would close 22\/tcp .*--allow-close 22\/tcp/);
      t.same(await foundRules(), before, 'the found firewall is as it was');
      t.ok(await gap0(), 'still adopted');
    });

    await t.test('allowed by name (--allow-close 22/tcp): converged; the open session lives on, a new one is refused; then returned', async (t) => {
      const { preview: p } = await preview();
      const r = await run('node', 'converge', m.name, '--yes', '--preview-id', p.id, '--allow-close', `${SSH}/tcp`, '--timeout', '180');
      t.equal(r.code, 0, r.err);
      t.match(r.out, /node a1 converged, by its agent's report/);
      const echoes = session.lines.filter((l) => l.msg === 'echo').length;
      await session.waitFor((l) => l.msg === 'echo' && Number(l.n) > echoes + 3, 20_000);
      t.notOk(
        session.lines.some((l) => l.msg === 'closed'),
        'the session open at the flip lives on (established traffic passes)',
      );
      t.notOk(await reaches(c.ns, '10.97.0.1', SSH), 'but no new ssh session opens: the door closed, as the preview said');
      const back = await run('node', 'adopt', m.name, '--yes', '--timeout', '180');
      t.equal(back.code, 0, back.err);
      t.same(await foundRules(), before, 'adopted again: the found rules, as they were');
      t.ok(await reachesSoon(c.ns, '10.97.0.1', SSH, 10), 'and ssh opens again through them');
    });

    await t.test('with the ssh module taken, the flip goes through to the previewed id: converged, the session and the tunnel carried', async (t) => {
      for (const verb of ['assign', 'take']) await b.cli('module', verb, m.name, 'ssh', '--yes');
      await until('ssh taken', gap0, 60);
      const { preview: p } = await preview();
      t.match(
        p.items.find((i) => i.port === SSH),
        { after: 'open', declaredBy: 'ssh', liveConnections: 1 },
      );
      const echoes = session.lines.filter((l) => l.msg === 'echo').length;
      const r = await run('node', 'converge', m.name, '--yes', '--preview-id', p.id, '--timeout', '180');
      t.equal(r.code, 0, r.err);
      t.match(r.out, new RegExp(`node a1 converged, by its agent's report \\(preview ${p.id}\\)`));
      const tables = (await m.ns.exec('nft', ['list', 'tables'])).stdout;
      t.notMatch(tables, /table inet filter\b/, 'the found table retired (its rules kept for the return)');
      t.notOk(await reaches(b.outside, '10.97.0.1', PORT), `${PORT}, which no module declares, is closed from the underlay`);
      t.ok(await reaches(b.outside, '10.97.0.1', SSH), 'ssh, declared, answers');
      await session.waitFor((l) => l.msg === 'echo' && Number(l.n) > echoes + 3, 20_000);
      t.notOk(
        session.lines.some((l) => l.msg === 'closed'),
        "the operator's session was never cut",
      );
      t.ok(await reachesSoon(m.ns, cMesh, STORE), 'the member still reaches the store over the tunnel');
      t.ok(((await wgPeers(m)).get(keyOf(c)) ?? 0) > 0, 'its WireGuard session with the control-node holds');
    });

    await t.test('back to adopted: the found firewall is back, rule for rule', async (t) => {
      const r = await run('node', 'adopt', m.name, '--yes', '--timeout', '180');
      t.equal(r.code, 0, r.err);
      t.same(await foundRules(), before, 'the found rules, as they were');
      t.ok(await reachesSoon(b.outside, '10.97.0.1', PORT, 10), `${PORT} answers from the underlay again, through the found firewall`);
      t.ok(await reachesSoon(m.ns, cMesh, STORE), 'and the tunnel still carries');
    });
  },
);

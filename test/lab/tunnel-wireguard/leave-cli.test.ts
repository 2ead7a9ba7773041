/**
 * `meshp agent leave --state DIR` (issue 33 item 9): the same leave on purpose, from the agent's
 * state folder, the controller not asked. `--preview` says what will go and changes nothing; off a
 * terminal without `--yes` it is refused MESHP_CONFIRM_NEEDED; `--yes` stops the wireguard-go the
 * agent left running, the interface, its table and the marked rules (the tunnel's, the resolver's), and keeps the found table byte
 * for byte; an agent started on that state folder afterwards refuses (MESHP_REMOVED, status 3).
 */
import t from 'tap';
import { labAvailable } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { alive } from './bed.js';
import { exitsWithin, member, wgPidOf } from './leave-bed.js';

fileBudget(120);

t.test('meshp agent leave', { skip: labAvailable() ? false : 'needs root for a namespace, nftables and wireguard-go (CI runs it as root)' }, async (t) => {
  const m = await member(t, 'lvc');
  const before = await m.found();
  const a = m.agent('a1', { tunnel: true, token: m.token() });
  const pid = Number((await a.proc.waitFor((l) => l.msg === 'tunnel attached', 60_000)).pid);
  await until(
    "the tunnel's and the resolver's ports opened in the found table",
    async () => {
      const found = await m.found();
      return ['meshp:tunnel/incoming/udp/51820', 'meshp:dns/incoming/udp/53', 'meshp:dns/incoming/tcp/53'].every((id) => found.includes(id));
    },
    40,
  );
  a.proc.kill('SIGTERM');
  t.equal(await a.proc.exited, 0, 'the agent stopped (the unit stopped first, as the README says)');
  t.ok(alive(pid), 'wireguard-go outlives it, as it does across a restart');
  const leave = (...flags: string[]) => m.cli('agent', 'leave', '--state', a.state, '--firewall', 'nftables', ...flags);
  const withRule = await m.found();

  await t.test('--preview: names what will go, changes nothing', async (t) => {
    const r = leave('--preview');
    t.equal(r.code, 0, r.err);
    t.match(r.out, /^node a1 leaves network default; the controller is not told/);
    t.match(r.out, `will remove:\n  - wireguard-go (pid ${pid}) and its interface ${a.ifname}`);
    t.match(r.out, `  - nft table inet meshp_wg_${a.ifname}\n`);
    t.match(r.out, '  - marked nftables rule meshp:tunnel/incoming/udp/51820\n');
    // The mesh's resolver's port, opened to the mesh range (the tunnel address's prefix) in the found table too.
    t.match(r.out, '  - marked nftables rule meshp:dns/incoming/udp/53\n');
    t.match(r.out, '  - marked nftables rule meshp:dns/incoming/tcp/53\n');
    t.ok(alive(pid), 'wireguard-go still runs');
    t.ok(await m.link(a.ifname), 'the interface is still there');
    t.equal(await m.found(), withRule, 'the firewall unchanged');
    const j = JSON.parse(leave('--preview', '--json').out) as { removed: string[]; preview: boolean };
    t.equal(j.preview, true);
    t.equal(j.removed.length, 5, 'the same five things, as JSON');
  });

  await t.test('without --yes off a terminal: refused, nothing changed', async (t) => {
    const r = leave();
    t.equal(r.code, 1);
    t.match(r.err, /^MESHP_CONFIRM_NEEDED: not asked on a terminal; give --yes/);
    const usage = leave('--yes', '--token', 'x');
    t.equal(usage.code, 2, "an agent's own flag is a usage error, not silently ignored");
    t.match(usage.err, /^MESHP_USAGE: meshp agent leave takes no --token/);
    t.ok(alive(pid));
    t.equal(await m.found(), withRule);
  });

  await t.test('--yes: wireguard-go, the interface, its table and the marked rule go; the found table stays', async (t) => {
    const r = leave('--yes');
    t.equal(r.code, 0, r.err);
    t.match(r.out, `removed:\n  - wireguard-go (pid ${pid})`);
    t.notOk(alive(pid), 'wireguard-go is gone');
    t.notOk(await m.link(a.ifname), 'the interface is gone');
    t.notMatch(await m.ruleset(), `meshp_wg_${a.ifname}`, "the interface's table is gone");
    t.equal(await m.found(), before, 'the found table is byte for byte what it was before the agent came');
    t.equal(wgPidOf(a.state, a.ifname), 0);
    const again = leave('--preview');
    t.match(again.out, /it left already at \S+: meshp agent leave; what remains/);
    t.notMatch(again.out, 'will remove:', 'nothing left to remove');
  });

  await t.test('the agent started again on that state folder refuses, raising nothing', async (t) => {
    const back = m.agent('a1', { tunnel: true });
    t.equal(await exitsWithin(back.proc, 30), 3);
    t.match(back.proc.stderr, /^MESHP_REMOVED: node a1 left network default at \S+ \(meshp agent leave\)/);
    t.equal(await m.found(), before, 'no rule put back');
  });

  await t.test('left under a running agent: the agent notices at its next reconcile, leaves too and exits 3', async (t) => {
    const b = m.agent('a2', { tunnel: true, token: m.token() });
    const bPid = Number((await b.proc.waitFor((l) => l.msg === 'tunnel attached', 60_000)).pid);
    await until('the tunnel port opened in the found table', async () => (await m.found()).includes('meshp:tunnel/incoming/udp/51820'), 40);
    const r = m.cli('agent', 'leave', '--state', b.state, '--firewall', 'nftables', '--yes');
    t.equal(r.code, 0, r.err);
    t.equal(await exitsWithin(b.proc, 30), 3, 'the running agent left');
    t.comment(b.proc.stderr.trim());
    t.match(b.proc.stderr, /^MESHP_REMOVED: node a2 left network default \(meshp agent leave\); /);
    t.notOk(alive(bPid), 'wireguard-go is gone');
    t.notOk(await m.link(b.ifname), 'the interface is gone');
    t.equal(await m.found(), before, 'whatever the agent put back in between is gone: the found table as it was');
  });
});

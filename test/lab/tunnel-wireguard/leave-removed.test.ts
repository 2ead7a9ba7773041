/**
 * A removed node leaves (issue 33 item 9). On a member with a found nftables firewall and the
 * WireGuard tunnel, `meshp node remove` makes its agent stop following, take away what the mesh
 * added — wireguard-go and its interface, the interface's nft table, the marked rule that opened the
 * tunnel's port in the found table — and exit with one MESHP_REMOVED line and status 3; the found
 * table is byte for byte what it was. An agent that was stopped when its node was removed is told so
 * at its next hello (a definite answer: its key was revoked) and leaves the same way. A state folder
 * that left is not raised again.
 */
import t from 'tap';
import { labAvailable } from '../../helpers/netns.js';
import { fileBudget, until } from '../../helpers/budget.js';
import { alive } from './bed.js';
import { exitsWithin, member, wgPidOf } from './leave-bed.js';

fileBudget(120);

t.test(
  'node remove: the agent takes away what the mesh added and exits coded',
  { skip: labAvailable() ? false : 'needs root for a namespace, nftables and wireguard-go (CI runs it as root)' },
  async (t) => {
    const m = await member(t, 'lvr');
    const before = await m.found();
    const [t1, t2] = [m.token(), m.token()];
    const a1 = m.agent('a1', { tunnel: true, token: t1 });
    const a2 = m.agent('a2', { tunnel: false, token: t2 });
    const up = await a1.proc.waitFor((l) => l.msg === 'tunnel attached', 60_000);
    const pid = Number(up.pid);
    await until('the tunnel port opened in the found table', async () => (await m.found()).includes('meshp:tunnel/incoming/udp/51820'), 40);
    t.ok(await m.link(a1.ifname), "a1's interface is up");
    t.match(await m.ruleset(), `table inet meshp_wg_${a1.ifname}`, "and the interface's own table loaded");
    await a2.proc.waitFor((l) => l.msg === 'reconciled', 60_000);
    a2.proc.kill('SIGTERM');
    t.equal(await a2.proc.exited, 0, 'a2 stopped before its node is removed');

    await t.test(
      'a1, connected: exits 3 with the coded line; wireguard-go, the interface, its table and the marked rule are gone; the found rules unchanged',
      async (t) => {
        const r = m.cli('node', 'remove', 'a1', '--yes', '--state', `${m.dir}/ctl`, '--controller', m.controller);
        t.equal(r.code, 0, r.err);
        t.equal(await exitsWithin(a1.proc, 30), 3, 'the agent exits with the status the README gives a removed node');
        const lines = a1.proc.stderr.trim().split('\n');
        t.equal(lines.length, 1, 'one line on stderr');
        t.comment(lines[0]!);
        t.match(
          lines[0],
          /^MESHP_REMOVED: node a1 left network default \(removed by the controller: node a1 was removed from default\); removed: /,
          'coded, naming the node and why',
        );
        t.match(lines[0], `wireguard-go (pid ${pid})`, 'naming the wireguard-go it stopped');
        t.match(lines[0], 'marked nftables rule meshp:tunnel/incoming/udp/51820');
        t.notOk(alive(pid), 'wireguard-go is gone');
        t.notOk(await m.link(a1.ifname), 'its interface is gone');
        t.notMatch(await m.ruleset(), `meshp_wg_${a1.ifname}`, "the interface's table is gone");
        t.equal(await m.found(), before, 'the found table is byte for byte what it was before the agent came: its marked rule gone, its own rules unchanged');
        t.equal(wgPidOf(a1.state, a1.ifname), 0, 'no pid file left');
      },
    );

    await t.test('a1 started again on the state folder that left: refused with the same code, nothing raised', async (t) => {
      const again = m.agent('a1', { tunnel: true });
      t.equal(await exitsWithin(again.proc, 30), 3);
      t.match(again.proc.stderr, /^MESHP_REMOVED: node a1 left network default at \S+ \(removed by the controller/);
      t.notOk(await m.link(again.ifname), 'no interface raised');
      t.equal(await m.found(), before, 'no rule put back');
    });

    await t.test('a2, stopped when it was removed: its next hello is answered MESHP_NODE_REVOKED and it leaves', async (t) => {
      const r = m.cli('node', 'remove', 'a2', '--yes', '--state', `${m.dir}/ctl`, '--controller', m.controller);
      t.equal(r.code, 0, r.err);
      const back = m.agent('a2', { tunnel: false });
      t.equal(await exitsWithin(back.proc, 30), 3, 'exits 3, not retrying for ever');
      t.match(back.proc.stderr, /^MESHP_REMOVED: node a2 left network default \(removed by the controller: node a2 was removed from default \(/);
    });
  },
);

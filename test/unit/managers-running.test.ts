/** Firewall managers recognised by their running process (core/src/lifecycle/managers.ts). */
import t from 'tap';
import { managersRunning, managersRunningRead } from '@meshp/core/lifecycle';

t.test('firewalld under its python interpreter, csf by the name lfd gives itself', async (t) => {
  const seen = managersRunning([
    { pid: 1, argv: ['/sbin/init'] },
    { pid: 812, argv: ['/usr/bin/python3', '-s', '/usr/sbin/firewalld', '--nofork', '--nopid'] },
    { pid: 900, argv: ['lfd - sleeping'] },
  ]);
  t.same(
    seen.map((m) => m.kind),
    ['firewalld', 'csf'],
  );
  t.match(seen[0]?.seen, /^process 812 \(\/usr\/bin\/python3 -s \/usr\/sbin\/firewalld/);
});

t.test('names that only contain the word are not managers', async (t) => {
  t.same(
    managersRunning([
      { pid: 5, argv: ['vim', '/etc/firewalld/firewalld.conf'] },
      { pid: 6, argv: ['/usr/bin/lfdx'] },
      { pid: 7, argv: ['grep', 'firewalld'] },
    ]),
    [],
  );
});

t.test("Proxmox VE's daemon by the name it gives itself", async (t) => {
  t.same(
    managersRunning([{ pid: 1400, argv: ['pve-firewall'] }]).map((m) => m.kind),
    ['pve-firewall'],
  );
});

t.test('with the node namespace known, only a daemon in it counts; one whose namespace cannot be read still does', async (t) => {
  const procs: Record<string, { argv: string; net: string | null }> = {
    '10': { argv: '/usr/sbin/firewalld\0--nofork\0', net: 'net:[4026532001]' },
    '11': { argv: 'lfd - sleeping\0', net: 'net:[4026531992]' },
    '12': { argv: 'pve-firewall\0', net: null },
  };
  const list = async (path: string) => (path === 'proc' ? Object.keys(procs) : []);
  const read = async (path: string) => procs[/^proc\/(\d+)\/cmdline$/.exec(path)?.[1] ?? '']?.argv ?? null;
  const of = async (pid: number) => procs[String(pid)]?.net ?? null;
  const seen = await managersRunningRead(list, read, { own: 'net:[4026531992]', of });
  t.same(
    seen.map((m) => m.kind),
    ['csf', 'pve-firewall'],
    "firewalld in another namespace is not this node's",
  );
  t.same((await managersRunningRead(list, read)).map((m) => m.kind).sort(), ['csf', 'firewalld', 'pve-firewall'], 'without the namespace known: every one');
});

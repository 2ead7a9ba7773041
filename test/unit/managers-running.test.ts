/** Firewall managers recognised by their running process (core/src/lifecycle/managers.ts). */
import t from 'tap';
import { managersRunning } from '@meshp/core/lifecycle';

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

// `--controller` repeated on the admin commands (issue 15: replicas sharing one PostgreSQL): the
// first address that answers is used; one that cannot be reached is passed over, nothing having been
// sent to it; a certificate that is not the pinned one stops the command there; all unreachable is
// one MESHP_UNAVAILABLE naming each. Against a real controller on 127.0.0.1 and ports known closed.
import t from 'tap';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { meshp, startController, workdir } from '../helpers/grpc-procs.js';

/** A port on 127.0.0.1 that nothing listens on: bound, then closed. */
async function closedPort(): Promise<string> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address() as { port: number };
  await new Promise<void>((r) => s.close(() => r()));
  return `127.0.0.1:${port}`;
}

t.test('admin commands over replicas: the first that answers', async (t) => {
  const dir = workdir(t, 'replicas-cli');
  const ctl = await startController(t, join(dir, 'ctl'));
  const other = await startController(t, join(dir, 'other'));
  const dead = await closedPort();
  const dead2 = await closedPort();

  const r = meshp('network', 'list', '--state', ctl.state, '--controller', dead, '--controller', ctl.address, '--json');
  t.equal(r.code, 0, `the second address answers when the first is down: ${r.err}`);
  t.match(JSON.parse(r.out), { networks: [{ name: 'default' }] }, 'and the command ran against it');

  const one = meshp('network', 'list', '--state', ctl.state, '--controller', ctl.address, '--json');
  t.equal(one.code, 0, 'one address still works as before');

  const none = meshp('network', 'list', '--state', ctl.state, '--controller', dead, '--controller', dead2);
  t.equal(none.code, 1, 'none answering fails');
  t.match(none.err, /MESHP_UNAVAILABLE: no controller answered: .*127\.0\.0\.1:\d+.*; .*127\.0\.0\.1:\d+/, 'naming each address tried');

  // Another controller (another certificate) first: not the pinned one, so the command stops there,
  // and the replica behind it is not tried.
  const wrong = meshp('network', 'list', '--state', ctl.state, '--controller', other.address, '--controller', ctl.address);
  t.not(wrong.code, 0, 'a certificate that is not the pinned one is refused');
  t.match(wrong.err, /MESHP_TLS_PIN/, 'with its code, not passed over');
});

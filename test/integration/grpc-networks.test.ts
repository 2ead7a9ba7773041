/** `meshp network create|list|remove` against a real controller over gRPC: a token and an agent per network. */
import t from 'tap';
import { join } from 'node:path';
import { createToken, meshp, meshpJson, startAgent, startController, waitUntil, workdir } from '../helpers/grpc-procs.js';

t.test('networks: create, list, refuse to remove one with nodes, remove an empty one', async (t) => {
  const dir = workdir(t, 'networks');
  const state = join(dir, 'ctl');
  const ctl = await startController(t, state);
  const cli = (...args: string[]) => meshp(...args, '--state', state, '--controller', ctl.address);
  const list = () =>
    meshpJson<{ networks: { name: string; members: number; privateRange: string }[] }>('network', 'list', '--state', state, '--controller', ctl.address)
      .networks;
  const made = cli('network', 'create', 'lab', '--range', '10.77.0.0/24');
  t.equal(made.code, 0, `network create: ${made.err}`);
  const a = startAgent(t, dir, 'l1', ctl.address, createToken(ctl, '--network', 'lab'));
  await a.proc.waitFor((l) => l.msg === 'applied', 60_000);
  const nets = await waitUntil(
    'l1 counted in lab',
    () => {
      const n = list();
      return n.find((x) => x.name === 'lab')?.members === 1 && n;
    },
    60_000,
  );
  t.same(
    nets.map((n) => [n.name, n.members, n.privateRange]),
    [
      ['default', 0, '100.96.0.0/16'],
      ['lab', 1, '10.77.0.0/24'],
    ],
    'network list: both, with node counts and ranges',
  );
  t.match(String(a.proc.lines.find((l) => l.msg === 'enrolled')?.network), 'lab', 'the agent enrolled in lab');
  const busy = cli('network', 'remove', 'lab', '--yes');
  t.not(busy.code, 0, 'a network with nodes is not removed');
  t.match(busy.err, /MESHP_USAGE/);
  const bad = cli('network', 'create', 'x', '--range', 'not-a-range');
  t.not(bad.code, 0, 'a range that is not a CIDR is refused');
  t.equal(cli('network', 'create', 'spare').code, 0);
  t.equal(cli('network', 'remove', 'spare', '--yes').code, 0, 'an empty network is removed');
  t.same(
    list().map((n) => n.name),
    ['default', 'lab'],
  );
});
